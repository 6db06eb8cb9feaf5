"""The lease backend contract (anarchon/backends/base.py), run against every lease store.

These call the backend directly: each rule of ``ClaimRequest`` and of fencing once.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from anarchon.backends.base import (
    EARLY_TOLERANCE_MS,
    Backend,
    ClaimRequest,
    Finish,
    HeldRun,
    JobSpec,
    LeaseBackend,
    RunKey,
)
from tests.support import run, wait_until

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


async def opened(make_backend: Callable[[], Backend]) -> LeaseBackend:
    backend = make_backend()
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


def test_one_winner_among_concurrent_claimers(make_backend: Callable[[], Backend]) -> None:
    async def scenario() -> None:
        backends = [await opened(make_backend) for _ in range(5)]
        slot = now_ms()
        results = await asyncio.gather(
            *(b.claim(request("job", slot, f"i{n}")) for n, b in enumerate(backends))
        )
        assert sorted(r.outcome for r in results) == ["taken"] * 4 + ["won"]
        assert [r.attempt for r in results if r.outcome == "won"] == [1]
        for b in backends:
            await b.close()

    run(scenario())


def test_late_claim_is_refused_by_store_clock(make_backend: Callable[[], Backend]) -> None:
    async def scenario() -> None:
        backend = await opened(make_backend)
        result = await backend.claim(request("job", now_ms() - 10_000, "a", max_late_ms=5_000))
        assert result.outcome == "late"
        assert await backend.history("job", 10) == []
        await backend.close()

    run(scenario())


def test_early_claim_is_refused_by_store_clock(make_backend: Callable[[], Backend]) -> None:
    """A claim more than ``EARLY_TOLERANCE_MS`` before its slot (an instance clock 2 s
    ahead), lone, batched or catch-up, is refused as ``early`` and writes nothing; at the
    slot it wins."""
    async def scenario() -> None:
        backend = await opened(make_backend)
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


def test_overlap_skip_is_final_and_allow_runs(make_backend: Callable[[], Backend]) -> None:
    async def scenario() -> None:
        backend = await opened(make_backend)
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


def test_takeover_only_after_expiry_and_once(make_backend: Callable[[], Backend]) -> None:
    async def scenario() -> None:
        owner = await opened(make_backend)
        backups = [await opened(make_backend) for _ in range(3)]
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


def test_stale_runner_is_fenced(make_backend: Callable[[], Backend]) -> None:
    async def scenario() -> None:
        a, b = await opened(make_backend), await opened(make_backend)
        slot = now_ms()
        await a.claim(request("job", slot, "a"))
        await expire(a, "job", slot)
        won = await b.claim(request("job", slot, "b", reason="takeover", expected_attempt=1))
        assert won.outcome == "won"
        beat = await a.heartbeat("a", [HeldRun("job", slot, 1)], [], LEASE_MS)
        assert RunKey("job", slot) in beat.lost
        assert await a.finish(finish("job", slot, "a", 1)) is False
        assert await a.release("a", HeldRun("job", slot, 1)) is False
        assert await b.finish(finish("job", slot, "b", 2)) is True
        records = await a.history("job", 10)
        assert [(r.attempt, r.status) for r in records] == [(2, "success"), (1, "interrupted")]
        await a.close()
        await b.close()

    run(scenario())


def test_heartbeat_renews_and_reports_watched(make_backend: Callable[[], Backend]) -> None:
    async def scenario() -> None:
        a, b = await opened(make_backend), await opened(make_backend)
        slot = now_ms()
        await a.claim(request("job", slot, "a"))
        for _ in range(4):  # renewing keeps it alive well past one lease
            beat = await a.heartbeat("a", [HeldRun("job", slot, 1)], [], LEASE_MS)
            assert not beat.lost
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


def test_exhausted_after_max_attempts(make_backend: Callable[[], Backend]) -> None:
    async def scenario() -> None:
        backend = await opened(make_backend)
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


def test_hand_over_is_not_counted(make_backend: Callable[[], Backend]) -> None:
    async def scenario() -> None:
        backend = await opened(make_backend)
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


def test_next_slot_interrupts_crashed_run(make_backend: Callable[[], Backend]) -> None:
    async def scenario() -> None:
        backend = await opened(make_backend)
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
        make_backend: Callable[[], Backend]) -> None:
    """An ``at()`` job deployed after its instant (``one_off``) is caught up once inside
    ``catch_up``; outside it, or for a job the store does not know, it is ``late``."""
    async def scenario() -> None:
        backend = await opened(make_backend)
        other = make_backend()
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


def test_catch_up_needs_job_known_before_slot(make_backend: Callable[[], Backend]) -> None:
    async def scenario() -> None:
        backend = await opened(make_backend)
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


def test_history_pruned_by_size_never_running(make_backend: Callable[[], Backend]) -> None:
    async def scenario() -> None:
        backend = await opened(make_backend)
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


def test_manual_runs_and_known_jobs(make_backend: Callable[[], Backend]) -> None:
    async def scenario() -> None:
        backend = await opened(make_backend)
        token = await backend.start_manual("job", "a", now_ms())
        await backend.finish_manual(token, "failure", "boom", 10, None)
        record = (await backend.history("job", 1))[0]
        assert (record.manual, record.reason, record.status, record.error) == (
            True, "manual", "failure", "boom")
        assert record.duration is not None
        assert record.duration >= 0
        assert [j.name for j in await backend.known_jobs()] == ["job"]
        await backend.close()

    run(scenario())


def test_a_registered_framework_round_trips(make_backend: Callable[[], Backend]) -> None:
    """A job's framework is stored with its registration and read by another process;
    a plain registration (as every row before frameworks were recorded) reads as plain,
    and registering again replaces it (a beat entry moved into plain code)."""
    async def scenario() -> None:
        backend = await opened(make_backend)  # "job": a plain registration
        specs = [JobSpec("beat-entry", "cron", "cron '0 3 * * *' (UTC)", "celery"),
                 JobSpec("marked-actor", "every", "every 5m", "dramatiq"),
                 JobSpec("refused-entry", "refused", "refused: no such task", "celery")]
        await backend.register(specs)
        reader = make_backend()
        await reader.open()
        known = {spec.name: spec for spec in await reader.known_jobs()}
        assert [known[spec.name] for spec in specs] == specs
        assert known["job"] == JobSpec("job", "every", "every 1s")
        assert known["job"].framework is None
        await backend.register([JobSpec("marked-actor", "every", "every 5m")])
        known = {spec.name: spec for spec in await reader.known_jobs()}
        assert known["marked-actor"] == JobSpec("marked-actor", "every", "every 5m")
        await reader.close()
        await backend.close()

    run(scenario())


# a note is data, never code: quotes, braces, Lua and SQL syntax, newlines, non-ASCII
NOTE = "retrying: ValueError: it's {\"x\"} ]] end; redis.call('FLUSHALL') -- ' OR 1=1 \n é ✓"


def test_note_shows_on_my_running_attempt_until_it_ends(
        make_backend: Callable[[], Backend]) -> None:
    async def scenario() -> None:
        a, b = await opened(make_backend), await opened(make_backend)
        slot = now_ms() - 5_000
        await a.claim(request("job", slot, "a", lease_ms=60_000))
        held = HeldRun("job", slot, 1)
        assert await a.note("a", held, NOTE) is True
        (record,) = await b.history("job", 10)  # seen by every instance
        assert (record.status, record.error, record.finished_at) == ("running", NOTE, None)
        assert await a.note("a", held, "retrying: again") is True  # the latest note wins
        assert (await a.history("job", 1))[0].error == "retrying: again"
        # still held and renewable: a note touches neither the lease nor the run's state
        assert not (await a.heartbeat("a", [held], [], 60_000)).lost
        assert [(s.owner, s.attempt, s.running) for s in await b.unfinished(["job"])] == [
            ("a", 1, True)]
        # another owner, or another attempt of mine: nothing changes
        assert await b.note("b", held, "not mine") is False
        assert await a.note("a", HeldRun("job", slot, 2), "no such attempt") is False
        assert await a.note("a", HeldRun("job", slot + 1, 1), "no such run") is False
        assert (await a.history("job", 1))[0].error == "retrying: again"
        # a success clears the note; the finished record takes no more notes
        assert await a.finish(finish("job", slot, "a", 1)) is True
        (record,) = await a.history("job", 10)
        assert (record.status, record.error) == ("success", None)
        assert await a.note("a", held, "too late") is False
        assert (await a.history("job", 1))[0].error is None
        # a failure's error replaces the note and is never overwritten afterwards
        later = slot + 1000
        await a.claim(request("job", later, "a", lease_ms=60_000, overlap="allow"))
        assert await a.note("a", HeldRun("job", later, 1), NOTE) is True
        assert await a.finish(Finish("job", later, "a", 1, "failure", "boom", 100, None,
                                     3_600_000)) is True
        assert await a.note("a", HeldRun("job", later, 1), "too late") is False
        assert [(r.slot, r.status, r.error) for r in await a.history("job", 10)] == [
            (later, "failure", "boom"), (slot, "success", None)]
        await a.close()
        await b.close()

    run(scenario())


def test_note_is_fenced_across_takeover_and_hand_over(
        make_backend: Callable[[], Backend]) -> None:
    async def scenario() -> None:
        a, b = await opened(make_backend), await opened(make_backend)
        slot = now_ms()
        await a.claim(request("job", slot, "a"))
        first = HeldRun("job", slot, 1)
        assert await a.note("a", first, "retrying: first") is True
        await expire(a, "job", slot)
        won = await b.claim(request("job", slot, "b", reason="takeover", expected_attempt=1))
        assert (won.outcome, won.attempt) == ("won", 2)
        # the stale runner's note changes nothing; the interrupted attempt keeps no note
        assert await a.note("a", first, "stale") is False
        assert await b.note("b", first, "not my attempt") is False
        second = HeldRun("job", slot, 2)
        assert await a.note("a", second, "not my attempt") is False
        assert await b.note("b", second, "retrying: second") is True
        assert [(r.attempt, r.status, r.error) for r in await a.history("job", 10)] == [
            (2, "running", "retrying: second"), (1, "interrupted", None)]
        # a hand-over ends the attempt: its note goes, and it takes no more
        assert await b.release("b", second) is True
        assert await b.note("b", second, "after release") is False
        assert [(r.attempt, r.status, r.error) for r in await a.history("job", 10)] == [
            (2, "interrupted", None), (1, "interrupted", None)]
        await a.close()
        await b.close()

    run(scenario())
