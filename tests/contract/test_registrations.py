"""Every lease store keeps when each job was last registered (``JobSpec.registered_ms``
in ``known_jobs()``), and a running scheduler registers its jobs again every
``REGISTER_EVERY``, so ``jobs()`` can tell live jobs from gone ones."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import pytest

from anarchon import AsyncScheduler, RunContext
from anarchon.backends.base import Backend, JobSpec
from anarchon.control import registration_refresh
from tests.support import run


def test_known_jobs_tell_when_each_job_was_last_registered(
        make_backend: Callable[[], Backend]) -> None:
    async def body() -> None:
        backend = make_backend()
        await backend.open()
        try:
            await backend.register([JobSpec("a", "every", "every 1s"),
                                    JobSpec("b", "every", "every 1s")])
            first = {s.name: s.registered_ms for s in await backend.known_jobs()}
            assert first["a"] is not None and first["b"] is not None
            assert abs(first["a"] - time.time() * 1000) < 60_000  # the store's clock
            await asyncio.sleep(0.05)
            await backend.register([JobSpec("a", "every", "every 2s")])
            again = {s.name: s for s in await backend.known_jobs()}
            assert again["a"].registered_ms is not None and \
                again["a"].registered_ms > first["a"]
            assert again["a"].schedule == "every 2s"
            assert again["b"].registered_ms == first["b"]
        finally:
            await backend.close()

    run(body())


def test_a_running_scheduler_registers_its_jobs_again(
        make_backend: Callable[[], Backend], monkeypatch: pytest.MonkeyPatch) -> None:
    def tick(ctx: RunContext) -> None: ...

    async def body() -> None:
        monkeypatch.setattr(registration_refresh, "REGISTER_EVERY", 0.3)
        scheduler = AsyncScheduler(make_backend(), lease=1.5, heartbeat=0.2)
        scheduler.every("refreshed", "1h", tick)
        await scheduler.start()
        try:
            [info] = await scheduler.jobs()
            assert info.last_registered is not None and not info.gone
            first = info.last_registered
            deadline = time.monotonic() + 10
            while True:  # the trigger poll carries the refresh (every heartbeat here)
                [info] = await scheduler.jobs()
                assert info.last_registered is not None
                if info.last_registered > first:
                    break
                assert time.monotonic() < deadline, "the registration was not refreshed"
                await asyncio.sleep(0.1)
        finally:
            await scheduler.stop()

    run(body())
