"""A dynamic job deleted and created again, on every lease store: the name a
``remove_job()`` freed takes an ``add_job()`` at once while instances that ran the job
(and registered it in the store) are still running, every view agrees on whether the job
exists (``jobs()``, ``pause()``, ``trigger()``, ``add_job()``), and the re-added job runs
once per slot after every process restarted."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import pytest

from anarchon import AsyncScheduler, JobNotFoundError, RunContext
from anarchon.backends import Backend
from tests.support import run, wait_until

QUICK: dict[str, Any] = dict(lease=2, heartbeat=0.3, jitter=0)

Runs = list[tuple[str, int, Any, str]]


def worker(make_backend: Callable[[], Backend], instance_id: str,
           runs: Runs) -> AsyncScheduler:
    """An instance offering handler ``report`` (records instance, slot, params, reason)."""
    scheduler = AsyncScheduler(make_backend(), instance_id=instance_id, **QUICK)

    @scheduler.handler("report")
    def report(ctx: RunContext) -> None:
        runs.append((instance_id, ctx.slot, ctx.params, ctx.reason))

    return scheduler


def scheduled(runs: Runs, after: float = 0.0, params: Any = ...) -> list[int]:
    """Slots of scheduled runs started for slots after ``after`` (epoch s)."""
    return [slot for _, slot, p, reason in runs if reason == "scheduled"
            and slot / 1000 >= after and (params is ... or p == params)]


async def listed(control: AsyncScheduler) -> set[str]:
    return {job.name for job in await control.jobs()}


def test_a_removed_dynamic_job_name_takes_add_job_again_at_once(
        make_backend: Callable[[], Backend]) -> None:
    runs: Runs = []

    async def scenario() -> None:
        workers = [worker(make_backend, f"w{n}", runs) for n in range(2)]
        for w in workers:
            await w.start()
        control = AsyncScheduler(make_backend())
        await control.add_job("readd", handler="report", every="1s", params={"v": 1})
        await wait_until(lambda: len(scheduled(runs, params={"v": 1})) >= 2, 8,
                         "two runs of the first job")
        # the instances that ran it registered it in the store: the name must not read as
        # a job declared in code once the dynamic job is removed
        assert "readd" in {spec.name for spec in await control.backend.known_jobs()}
        await control.remove_job("readd")
        removed_at = time.time()
        assert "readd" not in await listed(control)
        with pytest.raises(JobNotFoundError, match="removed with remove_job"):
            await control.pause("readd")
        with pytest.raises(JobNotFoundError, match="'readd'"):
            await control.trigger("readd")
        with pytest.raises(ValueError, match="not a dynamic job"):
            await control.remove_job("readd")

        change = await control.add_job("readd", handler="report", every="1s",
                                       params={"v": 2})
        readded_at = time.time()
        assert change.action == "add"
        info = {job.name: job for job in await control.jobs()}["readd"]
        assert (info.source, info.handler, info.params) == ("dynamic", "report", {"v": 2})
        await wait_until(lambda: len(scheduled(runs, readded_at, {"v": 2})) >= 3, 10,
                         "three runs of the re-added job")
        stray = scheduled(runs, removed_at + 0.25, {"v": 1})
        assert stray == [], f"the removed job ran after remove_job() returned: {stray}"
        slots = scheduled(runs)
        assert len(slots) == len(set(slots)), "a slot ran twice"
        await control.trigger("readd")  # Run now finds the re-added job
        await wait_until(lambda: any(reason == "manual" for *_, reason in runs), 10,
                         "the manual run of the re-added job")
        # the name is as free from a process that ran the job as from any other
        await workers[0].remove_job("readd")
        await workers[0].add_job("readd", handler="report", every="1s", params={"v": 3})
        third = time.time()
        await wait_until(lambda: len(scheduled(runs, third, {"v": 3})) >= 2, 10,
                         "runs after a re-add made by an instance that ran the job")
        assert [c.action for c in await control.changes("readd")] == [
            "add", "remove", "add", "remove", "add"]
        for w in workers:
            await w.stop()
        await control.stop()

    run(scenario())


def test_a_re_added_job_runs_once_per_slot_after_every_process_restarted(
        make_backend: Callable[[], Backend]) -> None:
    runs: Runs = []

    async def scenario() -> None:
        first = [worker(make_backend, f"a{n}", runs) for n in range(2)]
        for w in first:
            await w.start()
        control = AsyncScheduler(make_backend())
        await control.add_job("again", handler="report", every="1s")
        await wait_until(lambda: len(scheduled(runs)) >= 1, 8, "a run of the first job")
        await control.remove_job("again")
        await control.add_job("again", handler="report", every="1s", params={"v": 2})
        await wait_until(lambda: len(scheduled(runs, params={"v": 2})) >= 1, 8,
                         "a run of the re-added job")
        for w in first:
            await w.stop()
        await control.stop()

        # every process is new: the stored job is the re-added one, and runs
        second = [worker(make_backend, f"b{n}", runs) for n in range(3)]
        for w in second:
            await w.start()
        restarted = time.time()
        control = AsyncScheduler(make_backend())
        info = {job.name: job for job in await control.jobs()}["again"]
        assert (info.source, info.params) == ("dynamic", {"v": 2})
        await wait_until(lambda: len(scheduled(runs, restarted + 1)) >= 3, 10,
                         "three runs after the restart")
        slots = scheduled(runs)
        assert len(slots) == len(set(slots)), "a slot ran twice"
        assert {i for i, slot, *_ in runs if slot / 1000 >= restarted + 1} <= {
            "b0", "b1", "b2"}
        with pytest.raises(ValueError, match="exists already"):
            await control.add_job("again", handler="report", every="1s")
        await control.remove_job("again")
        removed_at = time.time()
        await control.add_job("again", handler="report", every="1s", params={"v": 3})
        await wait_until(lambda: len(scheduled(runs, params={"v": 3})) >= 2, 10,
                         "runs of the job re-added after the restart")
        assert not scheduled(runs, removed_at + 0.25, {"v": 2})
        await asyncio.sleep(0)
        for w in second:
            await w.stop()
        await control.stop()

    run(scenario())


def test_a_code_job_keeps_its_name_and_forget_clears_a_removed_one(
        make_backend: Callable[[], Backend]) -> None:
    """The rule that frees a removed dynamic job's name never frees a code job's: a name
    declared in code (here or by another instance) is refused; ``forget()`` removes the
    registration a removed dynamic job left, and the name is still free afterwards."""
    runs: Runs = []

    async def scenario() -> None:
        coded = AsyncScheduler(make_backend(), instance_id="code", **QUICK)
        coded.every("tick", "1h", lambda ctx: None)
        await coded.start()
        w = worker(make_backend, "w", runs)
        await w.start()
        control = AsyncScheduler(make_backend())
        with pytest.raises(ValueError, match="declared in code"):
            await control.add_job("tick", handler="report", every="1s")
        with pytest.raises(ValueError, match="declared in code"):
            await coded.add_job("tick", handler="report", every="1s")
        await control.add_job("dyn", handler="report", every="1s")
        await wait_until(lambda: len(scheduled(runs)) >= 1, 8, "a run of the dynamic job")
        await control.remove_job("dyn")
        await wait_until(lambda: "dyn" not in w.job_names, 5, "the instance dropped the job")
        assert "dyn" in {spec.name for spec in await control.backend.known_jobs()}
        assert await control.forget("dyn") >= 1
        assert "dyn" not in {spec.name for spec in await control.backend.known_jobs()}
        assert "dyn" not in await listed(control)
        assert (await control.add_job("dyn", handler="report", every="1h")).action == "add"
        assert await listed(control) >= {"tick", "dyn"}
        for s in (coded, w, control):
            await s.stop()

    run(scenario())
