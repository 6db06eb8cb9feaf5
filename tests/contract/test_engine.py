"""Engine behaviour over real stores, in one process: claims, leases, hand-over, history.

Every test runs against each lease store (SQLite, Redis, Valkey, PostgreSQL …) with
short leases; waits poll with deadlines.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from anarchon import AsyncScheduler, AsyncTracker, JobTimeout, RunContext, RunToken
from anarchon.backends import Backend
from anarchon.backends.base import EARLY_TOLERANCE_MS
from anarchon.clock import OffsetClock
from tests.conftest import only_lease_stores
from tests.support import EventLog, run, wait_until

LEASE, HEARTBEAT = 1.5, 0.2
FAST: dict[str, Any] = dict(lease=LEASE, heartbeat=HEARTBEAT, jitter=0.05)


def cluster(make_backend: Callable[[], Backend], size: int, log: EventLog,
            **options: Any) -> list[AsyncScheduler]:
    return [
        log.attach(AsyncScheduler(make_backend(), instance_id=f"i{n}", **{**FAST, **options}))
        for n in range(size)
    ]


def soon(seconds: float = 0.6) -> datetime:
    """A whole second at least ``seconds`` from now (all instances must pass the same)."""
    moment = datetime.now(timezone.utc) + timedelta(seconds=seconds)
    return moment.replace(microsecond=0) + timedelta(seconds=1)


def test_each_slot_starts_once_across_instances(make_backend: Callable[[], Backend]) -> None:
    log = EventLog()
    starts: list[tuple[int, str]] = []

    async def scenario() -> None:
        schedulers = cluster(make_backend, 3, log)
        for s in schedulers:
            s.every("tick", "1s", lambda ctx: starts.append((ctx.slot, ctx.instance_id)))
            await s.start()
        await wait_until(lambda: len({slot for slot, _ in starts}) >= 3, 10, "three slots")
        for s in schedulers:
            await s.stop()

    run(scenario())
    slots = [slot for slot, _ in starts]
    assert len(slots) == len(set(slots)), starts
    taken = {e.slot for e in log.of("skip") if e.reason == "taken"}
    assert set(slots) <= taken | set(slots)
    assert log.of("skip") and all(e.reason == "taken" for e in log.of("skip"))


@only_lease_stores("redis", "sqlite")
def test_jitter_longer_than_the_interval_loses_no_slot(
        make_backend: Callable[[], Backend]) -> None:
    """``every 1s`` with the default 2 s jitter and ``overlap="skip"``: had a claim waited
    past the next slot, that slot could win first and the earlier one be skipped for ever.
    The wait is capped under half the gap, so every slot runs, once, in order."""
    log = EventLog()
    starts: list[int] = []

    async def scenario() -> None:
        schedulers = cluster(make_backend, 3, log, jitter=2)
        for s in schedulers:
            s.every("tick", "1s", lambda ctx: starts.append(ctx.slot), overlap="skip")
            await s.start()
        await wait_until(lambda: len(starts) >= 5, 15, "five slots")
        for s in schedulers:
            await s.stop()

    run(scenario())
    assert len(starts) == len(set(starts)), starts
    first, last = min(starts), max(starts)
    assert sorted(starts) == list(range(first, last + 1, 1000)), starts
    assert not [e for e in log.of("skip") if e.reason == "overlap"]


def test_late_claims_are_refused_by_the_store(make_backend: Callable[[], Backend]) -> None:
    log = EventLog()

    async def scenario() -> None:
        behind = log.attach(AsyncScheduler(make_backend(), clock=OffsetClock(-30), max_late=5,
                                           **FAST))
        behind.every("tick", "1s", lambda ctx: None)
        await behind.start()
        await log.wait(lambda e: e.type == "skip" and e.reason == "late", 5)
        await behind.stop()

    run(scenario())
    assert not log.of("start")


def test_instance_clock_ahead_runs_each_slot_at_its_time(
        make_backend: Callable[[], Backend]) -> None:
    """An instance whose clock is 2 s ahead has its claims refused as ``early`` by the
    store's clock and claims again when the slot comes: every slot runs, none early."""
    log = EventLog()
    starts: list[tuple[int, float]] = []

    async def scenario() -> None:
        ahead = log.attach(AsyncScheduler(make_backend(), clock=OffsetClock(2), **FAST))
        ahead.every("tick", "1s", lambda ctx: starts.append((ctx.slot, time.time())))
        await ahead.start()
        await wait_until(lambda: len(starts) >= 3, 10, "three slots")
        await ahead.stop()

    run(scenario())
    early = [(slot, round(at - slot / 1000, 3)) for slot, at in starts
             if at < slot / 1000 - EARLY_TOLERANCE_MS / 1000 - 0.05]
    assert not early, early
    slots = [slot for slot, _ in starts]
    assert slots == sorted(set(slots)) and slots[-1] - slots[0] == 1000 * (len(slots) - 1)
    assert not [e for e in log.of("skip") if e.reason == "early"]


def test_overlap_skip_never_runs_two_at_once(make_backend: Callable[[], Backend]) -> None:
    log = EventLog()
    active: list[int] = []
    peak = [0]

    def slow(ctx: RunContext) -> None:
        active.append(ctx.slot)
        peak[0] = max(peak[0], len(active))
        ctx.signal.wait(1.6)
        active.remove(ctx.slot)

    async def scenario() -> None:
        schedulers = cluster(make_backend, 2, log)
        for s in schedulers:
            s.every("slow", "0.5s", slow)
            await s.start()
        await log.wait(lambda e: e.type == "success", 6)
        await log.wait(lambda e: e.type == "skip" and e.reason == "overlap", 4)
        for s in schedulers:
            await s.stop()

    run(scenario())
    assert peak[0] == 1
    skipped = {e.slot for e in log.of("skip") if e.reason == "overlap"}
    assert not skipped & {e.slot for e in log.of("start")}


def test_overlap_allow_runs_concurrently(make_backend: Callable[[], Backend]) -> None:
    log = EventLog()
    active: set[int] = set()
    peak = [0]

    async def slow(ctx: RunContext) -> None:
        active.add(ctx.slot)
        peak[0] = max(peak[0], len(active))
        await asyncio.sleep(1.2)
        active.discard(ctx.slot)

    async def scenario() -> None:
        (s,) = cluster(make_backend, 1, log)
        s.every("slow", "0.4s", slow, overlap="allow")
        await s.start()
        await wait_until(lambda: peak[0] >= 2, 5, "two concurrent runs")
        await s.stop()

    run(scenario())
    assert not log.of("skip")


def test_stop_hands_over_within_two_heartbeats(make_backend: Callable[[], Backend]) -> None:
    log = EventLog()

    def long_job(ctx: RunContext) -> None:
        ctx.signal.wait(10)
        ctx.signal.raise_if_aborted()

    async def scenario() -> None:
        schedulers = cluster(make_backend, 2, log, max_attempts=1)
        when = soon()
        for s in schedulers:
            s.at("once", when, long_job)
            await s.start()
        first = await log.wait(lambda e: e.type == "start", 5)
        runner = next(s for s in schedulers if s.instance_id == first.instance_id)
        backup = next(s for s in schedulers if s is not runner)
        stopped_at = time.monotonic()
        await runner.stop()
        took = await log.wait(lambda e: e.type == "start" and e.attempt == 2, 5)
        delay = log.when(lambda e: e is took)
        assert delay is not None
        assert took.instance_id == backup.instance_id
        assert took.reason == "takeover"
        # two heartbeats after the hand-over, plus slack for a loaded machine
        assert delay - stopped_at < 2 * HEARTBEAT + 0.5
        records = await backup.history("once")
        assert [(r.attempt, r.status) for r in records] == [(2, "running"), (1, "interrupted")]
        await backup.stop()

    run(scenario())
    assert [e.reason for e in log.of("interrupted")][:1] == ["stop"]


def test_handler_ignoring_abort_is_a_success(make_backend: Callable[[], Backend]) -> None:
    log = EventLog()

    async def scenario() -> None:
        (s,) = cluster(make_backend, 1, log)
        s.at("once", soon(0.3), lambda ctx: time.sleep(0.3))
        await s.start()
        await log.wait(lambda e: e.type == "start", 5)
        await s.stop()
        record = await AsyncScheduler(make_backend()).last_run("once")
        assert record is not None
        assert record.status == "success"

    run(scenario())
    assert [e.type for e in log.of("success")] == ["success"]
    assert [e.reason for e in log.of("interrupted")] == []


def test_timeout_aborts_and_records_failure(make_backend: Callable[[], Backend]) -> None:
    log = EventLog()
    seen: list[str | None] = []

    def stubborn(ctx: RunContext) -> None:
        ctx.signal.wait(5)
        seen.append(ctx.signal.reason)

    async def scenario() -> None:
        (s,) = cluster(make_backend, 1, log)
        s.at("once", soon(0.3), stubborn, timeout=0.3)
        await s.start()
        failure = await log.wait(lambda e: e.type == "failure", 5)
        assert isinstance(failure.error, JobTimeout)
        record = await s.last_run("once")
        assert record is not None
        assert record.status == "failure"
        assert "timeout" in (record.error or "")
        await s.stop()

    run(scenario())
    assert seen == ["timeout"]
    assert [e.reason for e in log.of("interrupted")] == ["timeout"]


def test_handler_error_is_recorded_and_scheduling_goes_on(
        make_backend: Callable[[], Backend]) -> None:
    log = EventLog()

    def broken(ctx: RunContext) -> None:
        raise RuntimeError(f"boom at {ctx.slot}")

    async def scenario() -> None:
        (s,) = cluster(make_backend, 1, log)
        s.every("broken", "0.5s", broken)
        await s.start()
        await wait_until(lambda: len(log.of("failure")) >= 2, 5, "two failures")
        records = await s.history("broken", 5)
        await s.stop()
        assert records[0].status == "failure"
        assert records[0].error is not None
        assert "RuntimeError: boom at" in records[0].error

    run(scenario())


def test_run_now_is_manual_and_merges_data(make_backend: Callable[[], Backend]) -> None:
    seen: list[Any] = []

    async def scenario() -> None:
        s = AsyncScheduler(make_backend(), data={"a": 1, "b": 1}, **FAST)
        s.every("job", "1h", lambda ctx: seen.append((ctx.manual, ctx.reason, ctx.data)),
                data={"b": 2, "c": 2})
        record = await s.run_now("job", data={"c": 3})
        assert (record.manual, record.reason, record.status) == (True, "manual", "success")
        stored = await s.history("job")
        assert [(r.manual, r.status) for r in stored] == [(True, "success")]
        await s.stop()

    run(scenario())
    assert seen == [(True, "manual", {"a": 1, "b": 2, "c": 3})]


def test_history_and_jobs_from_a_process_without_jobs(
        make_backend: Callable[[], Backend]) -> None:
    async def scenario() -> None:
        worker = AsyncScheduler(make_backend(), **FAST)
        worker.every("tick", "0.5s", lambda ctx: None)
        await worker.start()
        reader = AsyncScheduler(make_backend())
        deadline = time.monotonic() + 5
        while not await reader.history("tick"):
            assert time.monotonic() < deadline
            await asyncio.sleep(0.1)
        record = await reader.last_run("tick")
        assert record is not None
        assert record.scheduled_at.tzinfo is not None
        assert [j.name for j in await reader.jobs()] == ["tick"]
        await worker.stop()
        await reader.stop()

    run(scenario())


def test_catch_up_runs_newest_missed_slot_once(make_backend: Callable[[], Backend]) -> None:
    log = EventLog()

    async def scenario() -> None:
        first = AsyncScheduler(make_backend(), **FAST)
        first.every("report", "1s", lambda ctx: None)
        await first.start()  # the store now knows the job
        await first.stop()
        down_since = int(time.time() * 1000)
        await asyncio.sleep(2.2)  # two slots pass with nobody up
        later = cluster(make_backend, 2, log, catch_up=10)
        up_at = int(time.time() * 1000)
        for s in later:
            s.every("report", "1s", lambda ctx: None, catch_up=10)
        await asyncio.gather(*(s.start() for s in later))
        caught = await log.wait(lambda e: e.type == "start" and e.reason == "catch-up", 5)
        await asyncio.sleep(0.3)
        for s in later:
            await s.stop()
        missed = [slot for slot in range(down_since // 1000 * 1000 + 1000, up_at + 1, 1000)]
        assert caught.slot is not None
        assert caught.slot >= missed[-1]
        started = [e.slot for e in log.of("start")]
        assert len(started) == len(set(started))
        assert missed[0] not in started  # only the newest missed slot runs

    run(scenario())


def test_at_inside_catch_up_runs_once_as_catch_up_on_first_deploy(
        make_backend: Callable[[], Backend]) -> None:
    """An ``at()`` job first deployed after its instant, still inside ``catch_up``, runs
    once cluster-wide as ``catch-up``; instances started later do not run it again."""
    log = EventLog()
    when = (datetime.now(timezone.utc) - timedelta(seconds=3)).replace(microsecond=0)

    async def scenario() -> None:
        for _deploy in range(2):  # the first deploy, then a restart of every instance
            instances = cluster(make_backend, 3, log, catch_up=60)
            for s in instances:
                s.at("once", when, lambda ctx: None)
                # start() sends the catch-up claims before the planner claims any tick
                s.every("tick", "0.2s", lambda ctx: None)
            await asyncio.gather(*(s.start() for s in instances))
            await wait_until(lambda: len(log.of("success", "once")) == 1, 5, "the at() run")
            goal = len(log.of("start", "tick")) + 3
            await wait_until(lambda: len(log.of("start", "tick")) >= goal, 5,  # noqa: B023
                             "three ticks after the catch-up claims")
            for s in instances:
                await s.stop()

    run(scenario())
    starts = log.of("start", "once")
    assert [(e.reason, e.slot) for e in starts] == [
        ("catch-up", int(when.timestamp() * 1000))], starts


def test_a_catch_up_claim_another_instance_won_is_a_taken_skip(
        make_backend: Callable[[], Backend]) -> None:
    """An instance catching up a slot that another instance has run skips it as
    ``taken``, as it does a scheduled slot."""
    log = EventLog()
    when = (datetime.now(timezone.utc) - timedelta(seconds=3)).replace(microsecond=0)

    async def scenario() -> None:
        winner, loser = cluster(make_backend, 2, log, catch_up=60)
        for s in (winner, loser):
            s.at("once", when, lambda ctx: None)
        await winner.start()
        await log.wait(lambda e: e.type == "success" and e.name == "once", 5)
        await loser.start()
        skip = await log.wait(lambda e: e.type == "skip" and e.instance_id == "i1", 5)
        assert (skip.name, skip.slot, skip.reason) == ("once", int(when.timestamp() * 1000),
                                                        "taken")
        for s in (winner, loser):
            await s.stop()

    run(scenario())
    assert [(e.instance_id, e.reason) for e in log.of("start")] == [("i0", "catch-up")]


def test_first_deploy_has_nothing_to_catch_up(make_backend: Callable[[], Backend]) -> None:
    log = EventLog()

    deployed_ms = 0

    async def scenario() -> None:
        nonlocal deployed_ms
        (s,) = cluster(make_backend, 1, log)
        s.every("fresh", "0.2s", lambda ctx: None, catch_up=60)
        deployed_ms = int(time.time() * 1000)
        await s.start()
        await log.wait(lambda e: e.type == "start", 5)
        await s.stop()

    run(scenario())
    # nothing from before the job existed; a slot that fell due while start() registered
    # the job may be caught up (it is the job's, and would otherwise be lost)
    early = [e.slot for e in log.of("start")
             if e.reason != "scheduled" and (e.slot or 0) < deployed_ms]
    assert not early, early


def test_backup_takes_over_a_frozen_runner(make_backend: Callable[[], Backend]) -> None:
    log = EventLog()
    aborted: list[str | None] = []

    def job(ctx: RunContext) -> None:
        ctx.signal.wait(8)
        aborted.append(ctx.signal.reason)

    async def scenario() -> None:
        schedulers = cluster(make_backend, 2, log)
        when = soon()
        for s in schedulers:
            s.at("once", when, job)
            await s.start()
        first = await log.wait(lambda e: e.type == "start", 5)
        runner = next(s for s in schedulers if s.instance_id == first.instance_id)
        keeper = runner.lease_keeper
        assert keeper is not None
        keeper.suspend()  # frozen, as the store sees it: no more heartbeats
        took = await log.wait(lambda e: e.type == "start" and e.attempt == 2, LEASE + 3)
        assert took.reason == "takeover"
        keeper.resume()
        await log.wait(lambda e: e.type == "lost" and e.instance_id == runner.instance_id, 3)
        await wait_until(lambda: aborted == ["lost"], 3, "the frozen run's signal")
        for s in schedulers:
            await s.stop()
        records = await schedulers[0].history("once")
        assert [(r.attempt, r.status) for r in records][-1] == (1, "interrupted")
        assert sum(r.status == "success" for r in records) <= 1

    run(scenario())


def test_recovery_takes_over_orphaned_run(make_backend: Callable[[], Backend]) -> None:
    log = EventLog()

    async def scenario() -> None:
        when = soon(0.3)
        crashed = AsyncScheduler(make_backend(), instance_id="crashed", **FAST)
        crashed.at("once", when, lambda ctx: time.sleep(30))
        await crashed.start()
        await wait_until(lambda: crashed.stats().held_leases > 0, 5, "a run")
        keeper = crashed.lease_keeper
        assert keeper is not None
        keeper.suspend()  # as if the process died: no more heartbeats
        (fresh,) = cluster(make_backend, 1, log)
        fresh.at("once", when, lambda ctx: None)
        await asyncio.sleep(LEASE)
        await fresh.start()
        took = await log.wait(lambda e: e.type == "success", LEASE + 3)
        assert (took.attempt, took.reason) == (2, "takeover")
        await fresh.stop()
        crashed.runtime.tasks.mark_stopped()  # its thread never writes again

    run(scenario())


def test_detached_run_is_finished_by_a_tracker(make_backend: Callable[[], Backend]) -> None:
    log = EventLog()
    tokens: list[RunToken] = []

    async def scenario() -> None:
        (s,) = cluster(make_backend, 1, log)
        s.at("once", soon(0.3), lambda ctx: tokens.append(ctx.detach(lease=5)))
        await s.start()
        await wait_until(lambda: bool(tokens), 5, "the handler to detach")
        await asyncio.sleep(LEASE + 0.5)  # longer than the scheduler's lease: still held
        tracker = AsyncTracker(make_backend(), lease=LEASE, heartbeat=HEARTBEAT)
        assert await tracker.begin(tokens[0])
        record = await s.last_run("once")
        assert record is not None
        assert record.status == "running"
        assert await tracker.note(tokens[0], "retrying: OSError: flaky")
        record = await s.last_run("once")
        assert record is not None
        assert (record.status, record.error) == ("running", "retrying: OSError: flaky")
        assert await tracker.end(tokens[0], "failure", "worker said no")
        assert not await tracker.end(tokens[0], "success")  # fenced: already finished
        assert not await tracker.note(tokens[0], "too late")  # fenced too
        record = await s.last_run("once")
        assert record is not None
        assert (record.status, record.error) == ("failure", "worker said no")
        await tracker.close()
        await s.stop()

    run(scenario())
    assert not log.of("success")
    assert not log.of("failure")


def test_detached_run_nobody_picks_up_is_taken_over(make_backend: Callable[[], Backend]) -> None:
    log = EventLog()

    async def scenario() -> None:
        schedulers = cluster(make_backend, 2, log)
        when = soon(0.3)
        for s in schedulers:
            s.at("once", when, lambda ctx: ctx.detach(lease=0.5) if ctx.attempt == 1 else None)
            await s.start()
        took = await log.wait(lambda e: e.type == "success", 5)
        assert (took.attempt, took.reason) == (2, "takeover")
        for s in schedulers:
            await s.stop()

    run(scenario())


def test_trigger_runs_once_on_one_instance(make_backend: Callable[[], Backend]) -> None:
    log = EventLog()
    seen: list[tuple[str, Any]] = []

    async def scenario() -> None:
        schedulers = cluster(make_backend, 3, log)
        for s in schedulers:
            s.every("rare", "1h", lambda ctx: seen.append((ctx.instance_id, ctx.data)))
            await s.start()
        requester = AsyncScheduler(make_backend())
        await requester.trigger("rare", {"why": "admin"})
        await log.wait(lambda e: e.type == "success" and e.reason == "manual", 5)
        await asyncio.sleep(3 * HEARTBEAT)  # the others had their chance to take it too
        record = await requester.last_run("rare")
        assert record is not None
        assert (record.manual, record.reason, record.status) == (True, "manual", "success")
        await requester.stop()
        for s in schedulers:
            await s.stop()

    run(scenario())
    assert [data for _, data in seen] == [{"why": "admin"}]


def test_trigger_refuses_unknown_jobs_and_non_json(make_backend: Callable[[], Backend]) -> None:
    async def scenario() -> None:
        s = AsyncScheduler(make_backend())
        with pytest.raises(ValueError, match="nope"):
            await s.trigger("nope")
        with pytest.raises(TypeError, match="JSON"):
            await s.trigger("nope", {"client": object()})
        await s.stop()

    run(scenario())
