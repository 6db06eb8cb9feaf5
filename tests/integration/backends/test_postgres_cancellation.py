"""A PostgreSQL claim cancelled in flight (as ``stop()`` cancels one) ends in
``CancelledError``, never in another error that the engine would log as an outage.

psycopg's C implementation before 3.2.10 raised ``TypeError: an integer is required``
when a task was cancelled during a pipeline, which is how a claim is sent (psycopg ticket
#1005); ``pyproject.toml``'s floor is 3.2.10. ``scripts/floors.sh`` runs this file on the
lowest releases allowed. Without a server the test skips, in CI it fails.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter

import pytest

from anarchon.backends.base import ClaimRequest, JobSpec
from tests.stores import in_ci
from tests.stores.postgres import BASE_URL, STORE

pytest.importorskip("psycopg")
pytest.importorskip("psycopg_pool")
import psycopg
from psycopg import sql

from anarchon.backends.postgres import PostgresBackend

#: event-loop turns (then a short sleep) before the cancellation: spread over the claim
TURNS = range(8)
DELAYS = (0.0, 0.0002, 0.0005, 0.001)
REPEATS = 6
SUFFIXES = ("", "_attempts", "_jobs", "_meta", "_triggers", "_control", "_changes",
            "_offers", "_instances", "_values")


@pytest.fixture(scope="module", autouse=True)
def _server() -> None:
    reason = STORE.unavailable()
    if reason is not None:
        if in_ci():
            pytest.fail(f"CI requires PostgreSQL: {reason}")
        pytest.skip(reason)


def test_a_claim_cancelled_in_flight_raises_only_cancelled_error() -> None:
    table = "t_pgcancel_" + uuid.uuid4().hex[:12]
    endings: Counter[str] = Counter()

    async def claim_then_cancel(backend: PostgresBackend, slot: int, turns: int,
                                delay: float) -> None:
        task = asyncio.ensure_future(backend.claim(ClaimRequest(
            name="job", slot=slot, owner="A", reason="scheduled", lease_ms=60_000,
            max_late_ms=10**12, max_attempts=3, overlap="allow", catch_up_ms=0,
            expected_attempt=0)))
        for _ in range(turns):
            await asyncio.sleep(0)
        if delay:
            await asyncio.sleep(delay)
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            endings["cancelled"] += 1
        except Exception as exc:  # what the test looks for
            endings[f"{type(exc).__name__}: {exc}"] += 1
        else:
            endings["answered"] += 1

    async def main() -> None:
        slot = 1_000
        for turns in TURNS:
            for delay in DELAYS:
                for _ in range(REPEATS):
                    # a fresh backend each time: a cancelled claim may leave its
                    # connection mid-pipeline
                    backend = PostgresBackend(BASE_URL, table=table, pool_size=1)
                    await backend.open()
                    try:
                        await backend.register([JobSpec("job", "every", "1s")])
                        slot += 1_000
                        await claim_then_cancel(backend, slot, turns, delay)
                    finally:
                        await backend.close()

    try:
        asyncio.run(main())
    finally:
        with psycopg.connect(BASE_URL, autocommit=True) as conn:
            for suffix in SUFFIXES:
                conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(
                    sql.Identifier(table + suffix)))
    errors = {ending: n for ending, n in endings.items()
              if ending not in ("cancelled", "answered")}
    assert not errors, (psycopg.__version__, psycopg.pq.__impl__, dict(endings))
    assert endings["cancelled"], dict(endings)  # some cancellations did land mid-claim
