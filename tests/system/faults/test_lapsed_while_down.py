"""A lease that lapsed while the store itself was down is not taken over until the store
has been up for one lease: its runner may renew it or record its outcome first. A run its
runner handed over is taken over at once, however young the server.

Real servers of the test's own (Redis, Valkey with an append-only file; a throwaway
PostgreSQL cluster), stopped and started again; the backend is called directly.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from anarchon.backends import from_url
from anarchon.backends.base import ClaimRequest, HeldRun, JobSpec, LeaseBackend
from anarchon.errors import StoreError
from tests.harness.servers import Outage, throwaway

LEASE_MS = 1_500


def _request(slot: int, owner: str, reason: str = "scheduled",
             expected: int = 0, lease_ms: int = LEASE_MS) -> ClaimRequest:
    return ClaimRequest(name="job", slot=slot, owner=owner, reason=reason,  # type: ignore[arg-type]
                        lease_ms=lease_ms, max_late_ms=60_000, max_attempts=3,
                        overlap="skip", expected_attempt=expected)


async def _until_answered(backend: LeaseBackend, request: ClaimRequest,
                          deadline: float) -> str:
    """The claim's outcome once the store answers again (connections may need a retry)."""
    while True:
        try:
            return (await backend.claim(request)).outcome
        except StoreError:
            assert time.monotonic() < deadline, "the store never answered again"
            await asyncio.sleep(0.05)


def _on_own_server(kind: str, tmp_path: Path, namespace: str,
                   body: Callable[[Outage, LeaseBackend, LeaseBackend],
                                  Awaitable[None]]) -> None:
    """Run ``body(server, runner, backup)`` on a fresh server of the test's own, with two
    opened backends and the job ``job`` registered."""
    try:
        server = throwaway(kind, tmp_path, namespace)
    except FileNotFoundError as exc:
        pytest.skip(f"no {kind} server program: {exc}")

    async def scenario() -> None:
        runner, backup = from_url(server.url), from_url(server.url)
        assert isinstance(runner, LeaseBackend) and isinstance(backup, LeaseBackend)
        try:
            await runner.open()
            await backup.open()
            await runner.register([JobSpec("job", "every", "every 1h")])
            await body(server, runner, backup)
        finally:
            await runner.close()
            await backup.close()

    try:
        asyncio.run(scenario())
    finally:
        server.close()


@pytest.mark.parametrize("kind", ["redis", "valkey", "postgres"])
def test_lease_lapsed_while_the_store_was_down_is_taken_over_one_lease_later(
        kind: str, tmp_path: Path, namespace: str) -> None:
    async def body(server: Outage, runner: LeaseBackend, backup: LeaseBackend) -> None:
        slot = int(time.time() * 1000)
        assert (await runner.claim(_request(slot, "runner"))).outcome == "won"
        server.down()
        await asyncio.sleep(LEASE_MS / 1000 + 0.5)  # the lease lapses meanwhile
        server.up()
        up_at = time.monotonic()
        takeover = _request(slot, "backup", "takeover", expected=1)
        assert await _until_answered(backup, takeover, up_at + 10) == "taken"
        # every later try is deferred too, until the server has been up for a lease
        while (outcome := (await backup.claim(takeover)).outcome) == "taken":
            assert time.monotonic() < up_at + LEASE_MS / 1000 + 3, "never taken over"
            await asyncio.sleep(0.05)
        waited = time.monotonic() - up_at
        assert outcome == "won"
        # not at once: the server had been up a little before it took connections
        assert waited >= LEASE_MS / 1000 - 0.5, waited
        print(f"\nLAPSED {kind}: taken over {waited:.2f}s after the server came back")

    _on_own_server(kind, tmp_path, namespace, body)


@pytest.mark.parametrize("kind", ["redis", "valkey", "postgres"])
def test_a_run_handed_over_on_a_young_server_is_taken_over_at_once(
        kind: str, tmp_path: Path, namespace: str) -> None:
    # a fresh Redis Cluster in CI held graceful hand-overs for a whole lease this way
    lease_ms = 60_000  # the server is surely younger than this

    async def body(server: Outage, runner: LeaseBackend, backup: LeaseBackend) -> None:
        slot = int(time.time() * 1000)
        claim = _request(slot, "runner", lease_ms=lease_ms)
        assert (await runner.claim(claim)).outcome == "won"
        takeover = _request(slot, "backup", "takeover", expected=1, lease_ms=lease_ms)
        # still the runner's: the lease runs, and the young server defers lapses too
        assert (await backup.claim(takeover)).outcome == "taken"
        assert await runner.release("runner", HeldRun("job", slot, 1))
        result = await backup.claim(takeover)
        assert (result.outcome, result.attempt) == ("won", 2)

    _on_own_server(kind, tmp_path, namespace, body)
