"""The engine on a FakeClock: slots claimed exactly at their instant, one winner, catch-up.

The SQLite store uses the same fake clock, so store time equals engine time. Real waits are
only upper bounds (``asyncio.wait_for``) for work done in the store's thread.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import anarchon
from anarchon.events import Event

UTC = timezone.utc
START = 1_767_225_603.0  # 2026-01-01T00:00:03Z
SLOT_MS = 1_767_225_610_000  # the first 10 s slot after START
BOUND = 10.0  # seconds; only an upper bound for waits on the store thread


async def _yield_to_loop(times: int = 20) -> None:
    for _ in range(times):
        await asyncio.sleep(0)


def _scheduler(path: Path, clock: anarchon.FakeClock, instance_id: str,
               **options: Any) -> anarchon.AsyncScheduler:
    backend = anarchon.SqliteBackend(str(path), clock=clock)
    return anarchon.AsyncScheduler(backend, clock=clock, instance_id=instance_id, jitter=0,
                                   **options)


def _collect(scheduler: anarchon.AsyncScheduler, *types: Any) -> list[Event]:
    events: list[Event] = []
    for type_ in types:
        scheduler.on(type_, events.append)
    return events


async def _until(predicate: Callable[[], bool]) -> None:
    """Wait (in real time, at most BOUND) for work done in the store's thread."""
    for _ in range(int(BOUND / 0.005)):
        if predicate():
            return
        await asyncio.sleep(0.005)
    raise AssertionError(f"condition not reached within {BOUND}s")


def test_every_runs_exactly_at_its_slot(tmp_path: Path) -> None:
    async def main() -> None:
        clock = anarchon.FakeClock(start=START)
        scheduler = _scheduler(tmp_path / "x.db", clock, "a")
        runs: list[tuple[int, float, int, str, datetime, bool, str]] = []

        async def handler(ctx: anarchon.RunContext) -> None:
            runs.append((ctx.slot, clock.time(), ctx.attempt, ctx.reason, ctx.scheduled_at,
                         ctx.manual, ctx.instance_id))

        scheduler.every("t", "10s", handler)
        events = _collect(scheduler, "start", "success", "skip", "failure")
        await scheduler.start()
        try:
            await _yield_to_loop()
            clock.advance(6)  # 00:00:09, one second before the slot
            await _yield_to_loop()
            assert runs == []
            clock.advance(1)  # 00:00:10: the slot
            await _until(lambda: any(e.type == "success" for e in events))
            assert runs == [(SLOT_MS, SLOT_MS / 1000, 1, "scheduled",
                             datetime(2026, 1, 1, 0, 0, 10, tzinfo=UTC), False, "a")]
            assert [(e.type, e.slot, e.attempt, e.reason) for e in events] == [
                ("start", SLOT_MS, 1, "scheduled"), ("success", SLOT_MS, 1, "scheduled")]
            records = await scheduler.history("t")
            assert len(records) == 1
            record = records[0]
            assert (record.slot, record.attempt, record.reason, record.status,
                    record.instance_id, record.manual) == (SLOT_MS, 1, "scheduled", "success",
                                                           "a", False)
            assert record.started_at == datetime(2026, 1, 1, 0, 0, 10, tzinfo=UTC)
            assert record.scheduled_at.tzinfo is not None
            assert scheduler.next_run("t") == datetime(2026, 1, 1, 0, 0, 20, tzinfo=UTC)
        finally:
            await scheduler.stop()

    asyncio.run(main())


def _succeeded(events: list[Event], name: str, slot: int) -> bool:
    return any(e.type == "success" and e.name == name and e.slot == slot for e in events)


# The store runs every call on one thread, in order: once the witness job's run of a slot
# has finished (claim, then finish), a claim of that slot by any other job planned in the
# same turn of the planner has been answered too. So "did not run" needs no sleep.


def test_jobs_added_and_removed_while_running_are_planned_and_forgotten(tmp_path: Path
                                                                        ) -> None:
    async def main() -> None:
        clock = anarchon.FakeClock(start=START)
        scheduler = _scheduler(tmp_path / "x.db", clock, "a")
        ran: list[tuple[str, int]] = []
        scheduler.every("hourly", "1h", lambda ctx: ran.append((ctx.name, ctx.slot)))
        scheduler.every("witness", "10s", lambda ctx: None)
        done = _collect(scheduler, "success")
        skips = _collect(scheduler, "skip")
        await scheduler.start()
        try:
            await _yield_to_loop()
            # added while the planner sleeps (until :10): due then too, so planned alike
            scheduler.every("fast", "10s", lambda ctx: ran.append((ctx.name, ctx.slot)))
            await _yield_to_loop()
            clock.advance(7)  # 00:00:10
            await _until(lambda: _succeeded(done, "fast", SLOT_MS)
                         and _succeeded(done, "witness", SLOT_MS))
            assert ran == [("fast", SLOT_MS)]
            scheduler.remove("fast")
            await _yield_to_loop()
            clock.advance(10)  # 00:00:20: removed, so not run
            await _until(lambda: _succeeded(done, "witness", SLOT_MS + 10_000))
            assert ran == [("fast", SLOT_MS)]
            # added, removed and added again: the first entry for :30 is stale and must not
            # come back (it would claim :30 a second time: a "taken" skip of our own run)
            for step in ("every", "remove", "every"):
                if step == "every":
                    scheduler.every("fast", "10s",
                                    lambda ctx: ran.append((ctx.name, ctx.slot)))
                else:
                    scheduler.remove("fast")
                await _yield_to_loop()
            clock.advance(10)  # 00:00:30
            await _until(lambda: _succeeded(done, "fast", SLOT_MS + 20_000)
                         and _succeeded(done, "witness", SLOT_MS + 20_000))
            assert ran == [("fast", SLOT_MS), ("fast", SLOT_MS + 20_000)]
            assert skips == []
        finally:
            await scheduler.stop()

    asyncio.run(main())


def test_an_added_job_due_before_the_planners_wake_up_wakes_it(tmp_path: Path) -> None:
    async def main() -> None:
        clock = anarchon.FakeClock(start=START)
        scheduler = _scheduler(tmp_path / "x.db", clock, "a")
        ran: list[tuple[str, int]] = []
        scheduler.every("hourly", "1h", lambda ctx: ran.append((ctx.name, ctx.slot)))
        done = _collect(scheduler, "success")
        await scheduler.start()  # the planner sleeps towards the hour (30 s naps)
        try:
            await _yield_to_loop()
            scheduler.every("fast", "10s", lambda ctx: ran.append((ctx.name, ctx.slot)))
            await _yield_to_loop()
            clock.advance(7)  # 00:00:10, long before the planner's own wake-up
            await _until(lambda: _succeeded(done, "fast", SLOT_MS))
            assert ran == [("fast", SLOT_MS)]
        finally:
            await scheduler.stop()

    asyncio.run(main())


def test_a_schedule_that_fails_to_plan_stops_only_its_own_job(tmp_path: Path) -> None:
    async def main() -> None:
        clock = anarchon.FakeClock(start=START)
        scheduler = _scheduler(tmp_path / "x.db", clock, "a")
        ran: list[tuple[str, int]] = []
        for name in ("bad", "good"):
            scheduler.every(name, "10s", lambda ctx: ran.append((ctx.name, ctx.slot)))
        schedule = scheduler.runtime.jobs["bad"].schedule
        plain = schedule.next_after

        def next_after(after_ms: int) -> int | None:
            if after_ms > SLOT_MS:  # planning the slot after :20 (at :10) fails
                raise RuntimeError("schedule broke")
            return plain(after_ms)

        schedule.next_after = next_after  # type: ignore[method-assign]
        errors = _collect(scheduler, "error")
        done = _collect(scheduler, "success")
        await scheduler.start()
        try:
            await _yield_to_loop()
            clock.advance(7)  # 00:00:10: both run; "bad" cannot plan its next slot
            await _until(lambda: _succeeded(done, "bad", SLOT_MS)
                         and _succeeded(done, "good", SLOT_MS))
            assert [(e.name, e.slot, str(e.error)) for e in errors] == [
                ("bad", SLOT_MS, "schedule broke")]
            clock.advance(10)  # 00:00:20: only "good" ("good" is the witness)
            await _until(lambda: _succeeded(done, "good", SLOT_MS + 10_000))
            assert sorted(ran) == [("bad", SLOT_MS), ("good", SLOT_MS),
                                   ("good", SLOT_MS + 10_000)]
        finally:
            await scheduler.stop()

    asyncio.run(main())


def test_two_instances_one_winner_the_other_skips_taken(tmp_path: Path) -> None:
    async def main() -> None:
        clock = anarchon.FakeClock(start=START)
        ran: list[str] = []
        a = _scheduler(tmp_path / "x.db", clock, "a")
        b = _scheduler(tmp_path / "x.db", clock, "b")
        for scheduler in (a, b):
            scheduler.every("t", "10s", lambda ctx: ran.append(ctx.instance_id))
        events = _collect(a, "success", "skip")
        events_b = _collect(b, "success", "skip")
        await a.start()
        await b.start()
        try:
            await _yield_to_loop()
            clock.advance(7)
            await _until(lambda: len(events) + len(events_b) == 2)
            outcomes = sorted((e.type, e.reason, e.instance_id) for e in events + events_b)
            assert len(ran) == 1
            winner = ran[0]
            loser = "b" if winner == "a" else "a"
            assert outcomes == sorted([("success", "scheduled", winner),
                                       ("skip", "taken", loser)])
            assert all(e.slot == SLOT_MS for e in events + events_b)
        finally:
            await a.stop()
            await b.stop()

    asyncio.run(main())


def test_catch_up_runs_only_the_newest_missed_slot(tmp_path: Path) -> None:
    async def main() -> None:
        clock = anarchon.FakeClock(start=START)
        path = tmp_path / "x.db"
        first = _scheduler(path, clock, "first")
        first.every("t", "10s", lambda ctx: None)
        done = _collect(first, "success")
        await first.start()  # first deployment at :03: slot :00 predates it, no catch-up
        try:
            await _yield_to_loop()
            clock.advance(7)
            await _until(lambda: len(done) == 1)
        finally:
            await first.stop()

        clock.advance(65)  # everyone down through :20 ... :70 (now 00:01:15)
        second = _scheduler(path, clock, "second")
        reasons: list[tuple[int, str]] = []
        second.every("t", "10s", lambda ctx: reasons.append((ctx.slot, ctx.reason)))
        caught = _collect(second, "success")
        await second.start()
        try:
            await _until(lambda: len(caught) == 1)
            newest_missed = SLOT_MS + 60_000  # 00:01:10
            assert reasons == [(newest_missed, "catch-up")]
            history = await second.history("t")
            assert [(r.slot, r.reason, r.instance_id) for r in history] == [
                (newest_missed, "catch-up", "second"), (SLOT_MS, "scheduled", "first")]
        finally:
            await second.stop()

    asyncio.run(main())


def test_jitter_is_capped_under_half_the_gap_to_the_next_slot() -> None:
    from anarchon.engine.scheduler import jitter_cap_ms

    assert jitter_cap_ms(2.0, 0, 1000) == 500  # every 1s, default jitter: 0.5 s at most
    assert jitter_cap_ms(2.0, 0, 60_000) == 2000  # every minute: the jitter as set
    assert jitter_cap_ms(0.0, 0, 1000) == 0
    assert jitter_cap_ms(2.0, 0, None) == 2000  # the last slot of an `at` job
