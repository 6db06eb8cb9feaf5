"""Runtime control through the engine on every lease store: pause, resume, reschedule,
dynamic jobs and the version fence, with in-process schedulers (the cluster suite does the
same with real processes)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from anarchon import (
    AsyncScheduler,
    JobNotFoundError,
    RunContext,
    Scheduler,
    register_schedule_type,
)
from anarchon.backends import Backend
from anarchon.schedules.kinds import Schedule
from tests.support import EventLog, run, wait_until

#: short leases, and a heartbeat long enough that an instance has not polled yet when
#: the controller's call returns (the fence, not the poll, must stop old slots)
QUICK: dict[str, Any] = dict(lease=2, heartbeat=0.3, jitter=0)
DEAF: dict[str, Any] = dict(lease=10, heartbeat=3, jitter=0)


def deaf(backend: Backend) -> Backend:
    """A backend whose wake-up channel never delivers: the instance learns of changes
    only from its poll (every heartbeat) or a ``stale`` refusal."""
    async def silent(notify: Any) -> None:
        return None

    backend.watch = silent  # type: ignore[method-assign]
    return backend


def test_pause_stops_every_instance_even_one_that_has_not_heard(
        make_backend: Callable[[], Backend]) -> None:
    log = EventLog()
    starts: list[tuple[float, int]] = []

    async def scenario() -> None:
        workers = [log.attach(AsyncScheduler(deaf(make_backend()), instance_id=f"w{n}",
                                             **DEAF)) for n in range(2)]
        for w in workers:
            w.every("tick", "1s", lambda ctx: starts.append((time.time(), ctx.slot)))
            await w.start()
        await log.wait(lambda e: e.type == "success", 5)
        control = AsyncScheduler(make_backend())
        change = await control.pause("tick", by="ops")
        paused_at = time.time()
        assert (change.action, change.by, change.version) == ("pause", "ops", 1)
        # the next slot is refused as stale on the store, then skipped as paused
        await log.wait(lambda e: e.type == "skip" and e.reason == "paused", 5)
        late = [slot for started, slot in starts if started > paused_at]
        assert late == [], f"slots started after pause() returned: {late}"
        info = {j.name: j for j in await control.jobs()}["tick"]
        assert info.paused and info.next_run is None and info.version == 1
        await control.resume("tick")
        resumed_at = time.time()
        # a paused instance asks the store nothing: it hears of resume() at its next
        # poll (within one heartbeat) or at once through a wake-up channel
        await wait_until(lambda: any(t > resumed_at for t, _ in starts),
                         DEAF["heartbeat"] + 3, "a run after resume()")
        assert [c.action for c in await control.changes("tick")] == ["resume", "pause"]
        for w in workers:
            await w.stop()
        await control.stop()

    run(scenario())


def test_reschedule_moves_the_grid_and_reset_goes_back(
        make_backend: Callable[[], Backend]) -> None:
    starts: list[tuple[float, int]] = []

    async def scenario() -> None:
        workers = [AsyncScheduler(deaf(make_backend()), instance_id=f"w{n}", **DEAF)
                   for n in range(2)]
        for w in workers:
            w.every("tick", "1s", lambda ctx: starts.append((time.time(), ctx.slot)))
            await w.start()
        await wait_until(lambda: len(starts) >= 1, 5, "a first run")
        control = AsyncScheduler(make_backend())
        await control.reschedule("tick", every="3s")
        moved_at = time.time()
        await wait_until(lambda: any(t > moved_at for t, _ in starts), 8,
                         "a run on the new grid")
        await asyncio.sleep(3.5)
        after = [slot for started, slot in starts if started > moved_at]
        assert after and all(slot % 3000 == 0 for slot in after), after
        assert len(after) == len(set(after)), "a slot ran twice"
        infos = {j.name: j for j in await control.jobs()}
        assert (infos["tick"].source, infos["tick"].schedule) == ("override", "every 3s")
        await control.reschedule("tick", reset=True)
        assert {j.name: j for j in await control.jobs()}["tick"].source == "code"
        for w in workers:
            await w.stop()
        await control.stop()

    run(scenario())


def test_dynamic_job_runs_once_per_slot_where_its_handler_is(
        make_backend: Callable[[], Backend], caplog: pytest.LogCaptureFixture) -> None:
    runs: list[tuple[str, int, Any]] = []

    async def scenario() -> None:
        with_handler = [AsyncScheduler(make_backend(), instance_id=f"h{n}", **QUICK)
                        for n in range(2)]
        for w in with_handler:
            @w.handler("report")
            def report(ctx: RunContext, w: AsyncScheduler = w) -> None:
                runs.append((w.instance_id, ctx.slot, ctx.params))
            await w.start()
        without = AsyncScheduler(make_backend(), instance_id="bare", **QUICK)
        without.handler("other", lambda ctx: None)
        await without.start()
        control = AsyncScheduler(make_backend())
        with caplog.at_level(logging.WARNING, logger="anarchon"):
            await control.add_job("nightly", handler="report", every="1s",
                                  params={"tenant": 7}, jitter=0)
            added_at = time.time()
            await wait_until(lambda: len(runs) >= 3, 8, "three runs of the dynamic job")
            await wait_until(lambda: "no handler 'report'" in caplog.text, 5,
                             "the warning of the instance without the handler")
        info = {j.name: j for j in await control.jobs()}["nightly"]
        assert info.source == "dynamic" and info.handler == "report"
        assert info.params == {"tenant": 7}
        assert set(info.runnable_by) == {"h0", "h1"}
        with pytest.raises(ValueError, match="exists already"):
            await control.add_job("nightly", handler="report", every="2s")
        await control.add_job("nightly", handler="report", every="1s", params={"tenant": 8},
                              jitter=0, replace=True)
        await wait_until(lambda: any(p == {"tenant": 8} for _, _, p in runs), 5,
                         "a run with the new params")
        await control.remove_job("nightly")
        removed_at = time.time()
        count = len(runs)
        await asyncio.sleep(2.5)
        slots = [slot for _, slot, _ in runs]
        assert len(slots) == len(set(slots)), "a slot of the dynamic job ran twice"
        assert all(slot / 1000 < removed_at + 0.25 for slot in slots[count:]), (
            "a run started after remove_job() returned")
        assert all(slot / 1000 >= added_at - 1 for slot in slots)
        assert "nightly" not in {j.name for j in await control.jobs()}
        # added again by a process that never ran it, though the workers registered it:
        # a removed dynamic job's name is no code job's, so it is accepted and runs again
        await control.add_job("nightly", handler="report", every="1s", params={"tenant": 9},
                              jitter=0)
        await wait_until(lambda: any(p == {"tenant": 9} for _, _, p in runs), 5,
                         "a run of the job added again")
        for w in [*with_handler, without]:
            await w.stop()
        await control.stop()

    run(scenario())


def test_bad_changes_are_refused_before_anything_is_stored(
        make_backend: Callable[[], Backend]) -> None:
    async def scenario() -> None:
        worker = AsyncScheduler(make_backend(), **QUICK)
        worker.every("tick", "1h", lambda ctx: None)
        await worker.start()
        control = AsyncScheduler(make_backend())
        with pytest.raises(JobNotFoundError, match="nope"):
            await control.pause("nope")
        with pytest.raises(ValueError, match=r"job 'tick'"):
            await control.reschedule("tick", cron="61 * * * *")
        with pytest.raises(TypeError, match="exactly one of"):
            await control.reschedule("tick", every="1s", cron="* * * * *")
        with pytest.raises(TypeError, match="timezone= goes with cron="):
            await control.reschedule("tick", every="1s", timezone="UTC")
        with pytest.raises(ValueError, match=r"not a dynamic job"):
            await control.remove_job("tick")
        with pytest.raises(ValueError, match="declared in code"):
            await control.add_job("tick", handler="h", every="1s")
        with pytest.raises(TypeError, match="params="):
            await control.add_job("d", handler="h", every="1s", data={"secret": 1})
        with pytest.raises(TypeError, match="JSON"):
            await control.add_job("d", handler="h", every="1s", params={"x": object()})
        with pytest.raises(ValueError, match="jitter"):
            await control.add_job("d", handler="h", every="1s", jitter=-1)
        with pytest.raises(ValueError, match=r"Mars/Base"):
            await control.add_job("d", handler="h", cron="0 3 * * *", timezone="Mars/Base")
        await control.add_job("d", handler="h", every="1h")
        with pytest.raises(ValueError, match="dynamic job"):
            await control.reschedule("d", reset=True)
        assert await control.changes("tick") == []
        assert [c.action for c in await control.changes("d")] == ["add"]
        await worker.stop()
        await control.stop()

    run(scenario())


def test_the_blocking_scheduler_offers_the_same_calls(
        make_backend: Callable[[], Backend]) -> None:
    runs: list[Any] = []
    worker = Scheduler(make_backend(), **QUICK)

    @worker.handler
    def copy(ctx: RunContext) -> None:
        runs.append(ctx.params)

    assert callable(copy)
    worker.start()
    try:
        control = Scheduler(make_backend())
        control.add_job("copy-job", handler="copy", every="1s", params=[1, 2], jitter=0)
        deadline = time.monotonic() + 8
        while not runs and time.monotonic() < deadline:
            time.sleep(0.05)
        assert runs and runs[0] == [1, 2]
        assert control.offered_handlers() == {worker.instance_id: ["copy"]}
        control.pause("copy-job")
        assert [c.action for c in control.changes("copy-job")] == ["pause", "add"]
        control.close()
    finally:
        worker.stop()


class _EveryTwoSeconds(Schedule):
    """A schedule type of the test: every ``seconds`` on the UTC grid."""

    kind = "custom"

    def __init__(self, seconds: int) -> None:
        self.seconds = seconds

    def next_after(self, after_ms: int) -> int | None:
        step = self.seconds * 1000
        return (after_ms // step + 1) * step

    def describe(self) -> str:
        return f"every {self.seconds}s (test type)"


def _two_seconds(data: Mapping[str, Any]) -> Schedule:
    seconds = data["seconds"]
    if not isinstance(seconds, int) or seconds <= 0:
        raise ValueError(f"seconds must be a positive int, got {seconds!r}")
    return _EveryTwoSeconds(seconds)


register_schedule_type("tests.grid", _two_seconds)


def test_a_custom_schedule_type_is_stored_as_data_and_runs_once_per_slot(
        make_backend: Callable[[], Backend]) -> None:
    """``add_job(custom=)``: the type's data is stored, every instance builds the same
    schedule from it, each slot runs once; a type nobody registered and data its factory
    refuses are refused before anything is stored."""
    runs: list[tuple[str, int]] = []

    async def scenario() -> None:
        workers = [AsyncScheduler(make_backend(), instance_id=f"c{n}", **QUICK)
                   for n in range(2)]
        for w in workers:
            w.handler("tick", lambda ctx, w=w: runs.append((w.instance_id, ctx.slot)))
            await w.start()
        control = AsyncScheduler(make_backend())
        with pytest.raises(ValueError, match=r"'tests\.nowhere' is not registered"):
            await control.add_job("grid", handler="tick",
                                  custom={"type": "tests.nowhere", "data": {}})
        with pytest.raises(ValueError, match="seconds must be a positive int"):
            await control.add_job("grid", handler="tick",
                                  custom={"type": "tests.grid", "data": {"seconds": 0}})
        with pytest.raises(TypeError, match="exactly one of"):
            await control.add_job("grid", handler="tick", every="1s",
                                  custom={"type": "tests.grid", "data": {"seconds": 1}})
        assert await control.changes("grid") == [], "nothing was stored"
        await control.add_job("grid", handler="tick",
                              custom={"type": "tests.grid", "data": {"seconds": 1}})
        await wait_until(lambda: len(runs) >= 3, 8, "three runs of the custom schedule")
        info = {j.name: j for j in await control.jobs()}["grid"]
        assert (info.kind, info.schedule) == ("custom", "every 1s (test type)")
        await control.reschedule("grid", custom={"type": "tests.grid", "data": {"seconds": 2}})
        moved = len(runs)
        await wait_until(lambda: len(runs) >= moved + 2, 8, "two runs on the new grid")
        for w in workers:
            await w.stop()
        await control.stop()
        slots = [slot for _, slot in runs]
        assert len(slots) == len(set(slots)), "a slot of the custom schedule ran twice"
        assert all(slot % 2000 == 0 for slot in slots[moved + 1:]), slots

    run(scenario())
