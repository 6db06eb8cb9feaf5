"""A scheduler started with nothing to run, given its first job (or handler) later: from
then on it takes trigger requests and hears changes as one that started with it does,
on every lease store. Until then it polls for nothing (``anarchon.engine.wake_channel``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from anarchon import AsyncScheduler, RunContext
from anarchon.backends import Backend
from tests.support import EventLog, counted_polls, registered, run, wait_until

QUICK: dict[str, Any] = dict(lease=2, heartbeat=0.3, jitter=0)


def test_a_scheduler_without_jobs_polls_nothing_until_its_first_job(
        make_backend: Callable[[], Backend]) -> None:
    calls: list[float] = []

    async def scenario() -> None:
        s = AsyncScheduler(counted_polls(make_backend(), calls), lease=2, heartbeat=0.1)
        await s.start()
        await asyncio.sleep(1.0)  # ten heartbeats
        assert calls == []
        s.every("rare", "1h", lambda ctx: None)
        await wait_until(lambda: len(calls) >= 1, 2, "a trigger poll")
        await s.stop()

    run(scenario())


def test_a_job_added_after_start_runs_a_trigger_once(
        make_backend: Callable[[], Backend]) -> None:
    log = EventLog()
    seen: list[Any] = []

    async def scenario() -> None:
        s = log.attach(AsyncScheduler(make_backend(), instance_id="late", **QUICK))
        await s.start()
        s.every("rare", "1h", lambda ctx: seen.append(ctx.data))
        requester = AsyncScheduler(make_backend())
        await registered(requester, "rare", 5)
        await requester.trigger("rare", {"n": 1})
        done = await log.wait(lambda e: e.type == "success", 5)
        assert (done.name, done.reason, done.instance_id) == ("rare", "manual", "late")
        await asyncio.sleep(3 * QUICK["heartbeat"])  # a second run would show by now
        await requester.stop()
        await s.stop()

    run(scenario())
    assert seen == [{"n": 1}]
    assert len(log.of("start")) == 1


def test_a_handler_offered_after_start_runs_the_dynamic_job(
        make_backend: Callable[[], Backend]) -> None:
    runs: list[int] = []

    async def scenario() -> None:
        s = AsyncScheduler(make_backend(), instance_id="late", **QUICK)
        await s.start()

        @s.handler("report")
        def report(ctx: RunContext) -> None:
            runs.append(ctx.slot)

        control = AsyncScheduler(make_backend())
        deadline = time.monotonic() + 5
        while "late" not in await control.offered_handlers():  # read the records already
            assert time.monotonic() < deadline, "the handler was not offered"
            await asyncio.sleep(0.05)
        await control.add_job("nightly", handler="report", every="1s")
        await wait_until(lambda: len(runs) >= 2, 8, "two runs of the dynamic job")
        await control.stop()
        await s.stop()

    run(scenario())
    assert len(runs) == len(set(runs)), runs
