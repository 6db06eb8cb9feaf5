"""The store's side of runtime control (``anarchon/backends/control.py``) on every lease
store: compare-and-set of control records, the generation, the change log, handler
offers, and the version fence in claims."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable

from ..backends.base import Backend, ClaimRequest, JobSpec
from ..backends.capabilities import ControlStore
from ..backends.control import CHANGE_LOG_SIZE, ControlChange
from .support import run


async def opened(backend_factory: Callable[[], Backend]) -> ControlStore:
    backend = backend_factory()
    await backend.open()
    assert isinstance(backend, ControlStore)
    return backend


def change(name: str, expected: int, text: str = "{}", n: int = 0) -> ControlChange:
    return ControlChange(name, expected, text, json.dumps({"n": n, "job": name}))


def claim(name: str, slot: int, version: int, reason: str = "scheduled",
          owner: str = "a", expected_attempt: int = 0) -> ClaimRequest:
    return ClaimRequest(name=name, slot=slot, owner=owner, reason=reason,  # type: ignore[arg-type]
                        lease_ms=5_000, max_late_ms=60_000, max_attempts=3, overlap="allow",
                        catch_up_ms=60_000, expected_attempt=expected_attempt,
                        version=version)


def test_change_is_compare_and_set_and_moves_the_generation(
        backend_factory: Callable[[], Backend]) -> None:
    async def scenario() -> None:
        backend = await opened(backend_factory)
        empty = await backend.read_controls()
        assert dict(empty.records) == {}
        assert await backend.change_control(change("job", 0, '{"paused":true}')) == 1
        assert await backend.change_control(change("job", 0, '{"x":1}')) == 0  # stale
        first = await backend.read_controls()
        assert first.generation > empty.generation
        assert first.records["job"].version == 1
        assert first.records["job"].text == '{"paused":true}'
        assert await backend.change_control(change("job", 1, '{"paused":false}')) == 2
        assert await backend.change_control(change("job:{x}%", 0, '{"é":1}')) == 1
        second = await backend.read_controls()
        assert second.generation > first.generation
        assert {n: (r.version, r.text) for n, r in second.records.items()} == {
            "job": (2, '{"paused":false}'), "job:{x}%": (1, '{"é":1}')}
        await backend.close()

    run(scenario())


def test_one_winner_among_concurrent_changes(backend_factory: Callable[[], Backend]) -> None:
    async def scenario() -> None:
        backends = [await opened(backend_factory) for _ in range(4)]
        answers = await asyncio.gather(*(b.change_control(change("job", 0, f'{{"n":{n}}}'))
                                         for n, b in enumerate(backends)))
        assert sorted(answers) == [0, 0, 0, 1], answers
        for backend in backends:
            await backend.close()

    run(scenario())


def test_change_log_is_newest_first_and_bounded(backend_factory: Callable[[], Backend]) -> None:
    async def scenario() -> None:
        backend = await opened(backend_factory)
        for n in range(CHANGE_LOG_SIZE + 3):
            assert await backend.change_control(change("job", n, n=n)) == n + 1
        await backend.change_control(change("other", 0, n=-1))
        log = [json.loads(e) for e in await backend.change_log("job", 1000)]
        assert [e["n"] for e in log] == list(range(CHANGE_LOG_SIZE + 2, 2, -1))
        assert [json.loads(e)["n"] for e in await backend.change_log("job", 2)] == [
            CHANGE_LOG_SIZE + 2, CHANGE_LOG_SIZE + 1]
        assert await backend.change_log("nobody", 5) == []
        await backend.close()

    run(scenario())


def test_poll_brings_triggers_and_the_generation(backend_factory: Callable[[], Backend]) -> None:
    async def scenario() -> None:
        backend = await opened(backend_factory)
        before = await backend.poll(["job"])
        assert before.triggers == []
        await backend.request_trigger("job", '{"a":1}')
        await backend.change_control(change("job", 0))
        after = await backend.poll(["job"])
        assert [(t.name, t.data) for t in after.triggers] == [("job", '{"a":1}')]
        assert after.generation > before.generation
        assert after.generation == (await backend.read_controls()).generation
        assert (await backend.poll(["job"])).triggers == []
        await backend.close()

    run(scenario())


def test_handler_offers_are_listed_until_withdrawn(backend_factory: Callable[[], Backend]) -> None:
    async def scenario() -> None:
        backend = await opened(backend_factory)
        await backend.offer_handlers("i1", ["report", "mail"])
        await backend.offer_handlers("i2", ["report"])
        await backend.offer_handlers("i1", ["report", "mail", "sync"])  # replaces
        offers = (await backend.read_controls()).offers
        assert {k: sorted(v) for k, v in offers.items()} == {
            "i1": ["mail", "report", "sync"], "i2": ["report"]}
        await backend.offer_handlers("i2", [])
        assert set((await backend.read_controls()).offers) == {"i1"}
        await backend.close()

    run(scenario())


def test_claims_planned_from_an_older_version_are_refused(
        backend_factory: Callable[[], Backend]) -> None:
    async def scenario() -> None:
        backend = await opened(backend_factory)
        await backend.register([JobSpec("job", "every", "every 1s")])
        await asyncio.sleep(0.05)  # catch-up needs the job known before its slot
        slot = int(time.time() * 1000)
        assert await backend.change_control(change("job", 0)) == 1
        stale = await backend.claim(claim("job", slot, version=0))
        assert stale.outcome == "stale" and stale.attempt == 0
        # nothing was written: the current version still wins the slot
        won = await backend.claim(claim("job", slot, version=1, owner="b"))
        assert (won.outcome, won.attempt) == ("won", 1)
        # a batch is fenced per request; catch-up too
        batch = await backend.claim_many([claim("job", slot + 1, version=0),
                                          claim("job", slot + 2, version=1)])
        assert [getattr(a, "outcome", a) for a in batch] == ["stale", "won"]
        catch_up = await backend.claim(claim("job", slot - 1, version=0, reason="catch-up"))
        assert catch_up.outcome == "stale"
        # a newer version than the store's (a record not yet written) is not refused
        assert (await backend.claim(claim("other", slot, version=7))).outcome == "won"
        # jobs without a record are version 0
        assert (await backend.claim(claim("free", slot, version=0))).outcome == "won"
        await backend.close()

    run(scenario())


def test_takeovers_are_not_fenced(backend_factory: Callable[[], Backend]) -> None:
    async def scenario() -> None:
        backend = await opened(backend_factory)
        await backend.register([JobSpec("job", "every", "every 1s")])
        slot = int(time.time() * 1000)
        request = ClaimRequest(name="job", slot=slot, owner="a", reason="scheduled",
                               lease_ms=200, max_late_ms=60_000, max_attempts=3,
                               overlap="allow")
        assert (await backend.claim(request)).outcome == "won"
        await backend.change_control(change("job", 0, '{"paused":true}'))
        deadline = time.monotonic() + 5
        outcome = ""
        while time.monotonic() < deadline:  # the lease expires; a store just up defers
            result = await backend.claim(claim("job", slot, version=0, reason="takeover",
                                               owner="b", expected_attempt=1))
            outcome = result.outcome
            if outcome == "won":
                break
            await asyncio.sleep(0.1)
        assert outcome == "won"
        await backend.close()

    run(scenario())


def test_purge_removes_control_records(backend_factory: Callable[[], Backend]) -> None:
    async def scenario() -> None:
        backend = await opened(backend_factory)
        await backend.change_control(change("job", 0))
        await backend.offer_handlers("i1", ["h"])
        assert await backend.purge() >= 1
        snapshot = await backend.read_controls()
        assert dict(snapshot.records) == {} and dict(snapshot.offers) == {}
        assert await backend.change_log("job", 5) == []
        assert await backend.change_control(change("job", 0)) == 1
        await backend.close()

    run(scenario())
