"""The lease backend contract (anarchon/backends/base.py): claims, takeover, fencing,
heartbeats, catch-up. Each test calls the backend directly, once per rule of
``ClaimRequest`` and of fencing, on backends made by the ``backend_factory`` fixture."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from ..backends.base import (
    EARLY_TOLERANCE_MS,
    Backend,
    ClaimRequest,
    Finish,
    HeldRun,
    JobSpec,
    LeaseBackend,
    RunKey,
)
from .support import run, wait_until

LEASE_MS = 300


def request(name: str, slot: int, owner: str, **overrides: Any) -> ClaimRequest:
    fields: dict[str, Any] = dict(
        name=name, slot=slot, owner=owner, reason="scheduled", lease_ms=LEASE_MS,
        max_late_ms=60_000, max_attempts=3, overlap="skip",
    )
    fields.update(overrides)
    return ClaimRequest(**fields)


def finish(name: str, slot: int, owner: str, attempt: int, status: Any = "success") -> Finish:
    return Finish(name, slot, owner, attempt, status, None, 100, None, 3_600_000)


def now_ms() -> int:
    return int(time.time() * 1000)


async def opened(backend_factory: Callable[[], Backend]) -> LeaseBackend:
    backend = backend_factory()
    assert isinstance(backend, LeaseBackend)
    await backend.open()
    await backend.register([JobSpec("job", "every", "every 1s")])
    return backend


async def expire(backend: LeaseBackend, name: str, slot: int) -> None:
    async def expired() -> bool:
        states = await backend.unfinished([name])
        return any(s.slot == slot and s.lease_expired for s in states)

    deadline = time.monotonic() + 5
    while not await expired():
        assert time.monotonic() < deadline, "lease never expired"
        await asyncio.sleep(0.05)

def test_one_winner_among_concurrent_claimers(backend_factory: Callable[[], Backend]) -> None:
    async def scenario() -> None:
        backends = [await opened(backend_factory) for _ in range(5)]
        slot = now_ms()
        results = await asyncio.gather(
            *(b.claim(request("job", slot, f"i{n}")) for n, b in enumerate(backends))
        )
        assert sorted(r.outcome for r in results) == ["taken"] * 4 + ["won"]
        assert [r.attempt for r in results if r.outcome == "won"] == [1]
        for b in backends:
            await b.close()

    run(scenario())


def test_late_claim_is_refused_by_store_clock(backend_factory: Callable[[], Backend]) -> None:
    async def scenario() -> None:
        backend = await opened(backend_factory)
        result = await backend.claim(request("job", now_ms() - 10_000, "a", max_late_ms=5_000))
        assert result.outcome == "late"
        assert await backend.history("job", 10) == []
        await backend.close()

    run(scenario())


def test_early_claim_is_refused_by_store_clock(backend_factory: Callable[[], Backend]) -> None:
    """A claim more than ``EARLY_TOLERANCE_MS`` before its slot (an instance clock 2 s
    ahead), lone, batched or catch-up, is refused as ``early`` and writes nothing; at the
    slot it wins."""
    async def scenario() -> None:
        backend = await opened(backend_factory)
        await asyncio.sleep(0.05)  # the job was known before the slot (catch-up)
        slot = now_ms() + 2_000
        assert (await backend.claim(request("job", slot, "a"))).outcome == "early"
        batch = await backend.claim_many([
            request("job", slot, "a"),
            request("job", slot + 1_000, "a", reason="catch-up", catch_up_ms=60_000)])
        assert [a.outcome for a in batch if not isinstance(a, Exception)] == ["early"] * 2
        assert await backend.history("job", 10) == []
        assert await backend.unfinished(["job"]) == []
        await wait_until(lambda: now_ms() >= slot - EARLY_TOLERANCE_MS + 50, 5, "the slot")
        won = await backend.claim(request("job", slot, "a"))
        assert (won.outcome, won.attempt) == ("won", 1)
        assert won.store_ms >= slot - EARLY_TOLERANCE_MS
        await backend.close()

    run(scenario())


def test_overlap_skip_is_final_and_allow_runs(backend_factory: Callable[[], Backend]) -> None:
    async def scenario() -> None:
        backend = await opened(backend_factory)
        slot = now_ms() - 5_000  # the later slots have come too
        assert (await backend.claim(request("job", slot, "a", lease_ms=10_000))).outcome == "won"
        skipped = await backend.claim(request("job", slot + 1000, "b"))
        assert skipped.outcome == "overlap"
        again = await backend.claim(request("job", slot + 1000, "c"))
        assert again.outcome in ("taken", "overlap")  # never runs later
        allowed = await backend.claim(request("job", slot + 2000, "b", overlap="allow"))
        assert allowed.outcome == "won"
        await backend.close()

    run(scenario())


def test_takeover_only_after_expiry_and_once(backend_factory: Callable[[], Backend]) -> None:
    async def scenario() -> None:
        owner = await opened(backend_factory)
        backups = [await opened(backend_factory) for _ in range(3)]
        slot = now_ms()
        assert (await owner.claim(request("job", slot, "a"))).attempt == 1
        early = await backups[0].claim(
            request("job", slot, "b0", reason="takeover", expected_attempt=1))
        assert early.outcome == "taken"
        await expire(owner, "job", slot)
        results = await asyncio.gather(*(
            b.claim(request("job", slot, f"b{n}", reason="takeover", expected_attempt=1))
            for n, b in enumerate(backups)
        ))
        assert sorted(r.outcome for r in results) == ["taken", "taken", "won"]
        records = await owner.history("job", 10)
        assert [(r.attempt, r.status, r.reason) for r in records] == [
            (2, "running", "takeover"), (1, "interrupted", "scheduled")]
        for b in [owner, *backups]:
            await b.close()

    run(scenario())


def test_stale_runner_is_fenced(backend_factory: Callable[[], Backend]) -> None:
    async def scenario() -> None:
        a, b = await opened(backend_factory), await opened(backend_factory)
        slot = now_ms()
        await a.claim(request("job", slot, "a"))
        await expire(a, "job", slot)
        won = await b.claim(request("job", slot, "b", reason="takeover", expected_attempt=1))
        assert won.outcome == "won"
        beat = await a.heartbeat("a", [HeldRun("job", slot, 1)], [], LEASE_MS)
        assert RunKey("job", slot) in beat.lost
        assert not beat.gone  # another owner holds it: lost, not forgotten
        assert await a.finish(finish("job", slot, "a", 1)) is False
        assert await a.release("a", HeldRun("job", slot, 1)) is False
        assert await b.finish(finish("job", slot, "b", 2)) is True
        records = await a.history("job", 10)
        assert [(r.attempt, r.status) for r in records] == [(2, "success"), (1, "interrupted")]
        await a.close()
        await b.close()

    run(scenario())


def test_heartbeat_tells_a_forgotten_run_from_one_held_or_ended_elsewhere(
        backend_factory: Callable[[], Backend]) -> None:
    """A held run with no record at all (a failover to a replica that was behind, a
    flush, a restore) is ``lost`` and ``gone``; one that ended is ``lost`` only."""
    async def scenario() -> None:
        a = await opened(backend_factory)
        slot = now_ms()
        await a.claim(request("job", slot, "a"))
        assert await a.finish(finish("job", slot, "a", 1)) is True
        forgotten, ended = RunKey("job", slot + 1000), RunKey("job", slot)
        beat = await a.heartbeat("a", [HeldRun("job", slot, 1),
                                       HeldRun("job", slot + 1000, 1)], [], LEASE_MS)
        assert beat.lost == {forgotten, ended}
        assert beat.gone == {forgotten}
        await a.close()

    run(scenario())


def test_heartbeat_renews_and_reports_watched(backend_factory: Callable[[], Backend]) -> None:
    async def scenario() -> None:
        a, b = await opened(backend_factory), await opened(backend_factory)
        slot = now_ms()
        await a.claim(request("job", slot, "a"))
        for _ in range(4):  # renewing keeps it alive well past one lease
            beat = await a.heartbeat("a", [HeldRun("job", slot, 1)], [], LEASE_MS)
            assert not beat.lost and not beat.gone
            await asyncio.sleep(LEASE_MS / 2000)
        seen = await b.heartbeat("b", [], [RunKey("job", slot)], LEASE_MS)
        assert [(s.owner, s.attempt, s.running, s.lease_expired) for s in seen.watched] == [
            ("a", 1, True, False)]
        await a.finish(finish("job", slot, "a", 1))
        seen = await b.heartbeat("b", [], [RunKey("job", slot)], LEASE_MS)
        assert all(not s.running for s in seen.watched)
        await a.close()
        await b.close()

    run(scenario())


def test_exhausted_after_max_attempts(backend_factory: Callable[[], Backend]) -> None:
    async def scenario() -> None:
        backend = await opened(backend_factory)
        slot = now_ms()
        await backend.claim(request("job", slot, "a", max_attempts=2))
        await expire(backend, "job", slot)
        second = await backend.claim(request("job", slot, "b", reason="takeover",
                                             expected_attempt=1, max_attempts=2))
        assert (second.outcome, second.attempt) == ("won", 2)
        await expire(backend, "job", slot)
        third = await backend.claim(request("job", slot, "c", reason="takeover",
                                            expected_attempt=2, max_attempts=2))
        assert third.outcome == "exhausted"
        assert await backend.unfinished(["job"]) == []
        statuses = [r.status for r in await backend.history("job", 10)]
        assert statuses == ["interrupted", "interrupted"]
        await backend.close()

    run(scenario())


def test_hand_over_is_not_counted(backend_factory: Callable[[], Backend]) -> None:
    async def scenario() -> None:
        backend = await opened(backend_factory)
        slot = now_ms()
        await backend.claim(request("job", slot, "a", max_attempts=1))
        assert await backend.release("a", HeldRun("job", slot, 1)) is True
        states = await backend.unfinished(["job"])
        assert [(s.lease_expired, s.handed_over) for s in states] == [(True, True)]
        taken = await backend.claim(request("job", slot, "b", reason="takeover",
                                            expected_attempt=1, max_attempts=1))
        assert (taken.outcome, taken.attempt) == ("won", 2)
        await backend.close()

    run(scenario())


def test_next_slot_interrupts_crashed_run(backend_factory: Callable[[], Backend]) -> None:
    async def scenario() -> None:
        backend = await opened(backend_factory)
        slot = now_ms() - 5_000
        await backend.claim(request("job", slot, "a"))
        await expire(backend, "job", slot)
        nxt = await backend.claim(request("job", slot + 1000, "b"))
        assert nxt.outcome == "won"
        records = {r.slot: r.status for r in await backend.history("job", 10)}
        assert records == {slot: "interrupted", slot + 1000: "running"}
        await backend.close()

    run(scenario())


def test_one_off_catch_up_needs_the_job_known_not_known_before(
        backend_factory: Callable[[], Backend]) -> None:
    """An ``at()`` job deployed after its instant (``one_off``) is caught up once inside
    ``catch_up``; outside it, or for a job the store does not know, it is ``late``."""
    async def scenario() -> None:
        backend = await opened(backend_factory)
        other = backend_factory()
        assert isinstance(other, LeaseBackend)
        await other.open()
        before = now_ms() - 5_000  # the job was first seen after this instant
        unknown = await backend.claim(request("nobody", before, "a", reason="catch-up",
                                              catch_up_ms=60_000, one_off=True))
        outside = await backend.claim(request("job", before, "a", reason="catch-up",
                                              catch_up_ms=1_000, one_off=True))
        assert (unknown.outcome, outside.outcome) == ("late", "late")
        won = await backend.claim(request("job", before, "a", reason="catch-up",
                                          catch_up_ms=60_000, one_off=True))
        again = await other.claim(request("job", before, "b", reason="catch-up",
                                          catch_up_ms=60_000, one_off=True))
        assert (won.outcome, won.attempt, again.outcome) == ("won", 1, "taken")
        await backend.finish(finish("job", before, "a", 1))
        after = await other.claim(request("job", before, "b", reason="catch-up",
                                          catch_up_ms=60_000, one_off=True))
        assert after.outcome == "taken"  # a finished one-off never runs again
        records = await backend.history("job", 10)
        assert [(r.reason, r.status) for r in records] == [("catch-up", "success")]
        await other.close()
        await backend.close()

    run(scenario())


def test_catch_up_needs_job_known_before_slot(backend_factory: Callable[[], Backend]) -> None:
    async def scenario() -> None:
        backend = await opened(backend_factory)
        before = now_ms() - 5_000
        old = await backend.claim(request("job", before, "a", reason="catch-up",
                                          catch_up_ms=60_000))
        assert old.outcome == "late"  # the job was first seen after that slot
        await asyncio.sleep(0.05)
        slot = now_ms()
        await wait_until(lambda: now_ms() > slot + 100, 2, "a slot in the past")
        caught = await backend.claim(request("job", slot, "a", reason="catch-up",
                                             catch_up_ms=60_000, max_late_ms=1))
        assert (caught.outcome, caught.attempt) == ("won", 1)
        assert (await backend.history("job", 1))[0].reason == "catch-up"
        await backend.close()

    run(scenario())


def test_history_pruned_by_size_never_running(backend_factory: Callable[[], Backend]) -> None:
    async def scenario() -> None:
        backend = await opened(backend_factory)
        base = now_ms()
        await backend.claim(request("job", base, "a", lease_ms=60_000, overlap="allow"))
        for n in range(1, 6):
            slot = base + n
            await backend.claim(request("job", slot, "a", overlap="allow"))
            await backend.finish(Finish("job", slot, "a", 1, "success", None, 2, None,
                                        3_600_000))
        records = await backend.history("job", 50)
        statuses = sorted(r.status for r in records)
        assert statuses == ["running", "success", "success"]
        await backend.close()

    run(scenario())
