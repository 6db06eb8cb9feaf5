"""A job no instance has registered for ``GONE_AFTER_MS`` is ``gone`` in ``jobs()``
(real SQLite store; an injected store clock plays an instance that registered it 25 h
ago)."""

from __future__ import annotations

from pathlib import Path

from anarchon import AsyncScheduler, RunContext
from anarchon.backends.base import JobSpec
from anarchon.backends.sqlite import SqliteBackend
from anarchon.clock import OffsetClock
from tests.support import run

HOURS_25 = 25 * 3600.0


def test_jobs_registered_by_nobody_for_a_day_are_gone(tmp_path: Path) -> None:
    path = str(tmp_path / "store.db")

    def tick(ctx: RunContext) -> None: ...

    async def body() -> None:
        old = SqliteBackend(path, clock=OffsetClock(-HOURS_25))
        await old.open()
        await old.register([JobSpec("old", "every", "every 1h"),
                            JobSpec("declared-here", "every", "every 1h")])
        await old.close()
        recent = SqliteBackend(path, clock=OffsetClock(-3600.0))
        await recent.open()
        await recent.register([JobSpec("recent", "every", "every 1h")])
        await recent.close()

        scheduler = AsyncScheduler(SqliteBackend(path), lease=1.5, heartbeat=0.2)
        scheduler.every("declared-here", "1h", tick)
        infos = {info.name: info for info in await scheduler.jobs()}
        assert infos["old"].gone and infos["old"].last_registered is not None
        assert not infos["recent"].gone
        assert not infos["declared-here"].gone  # declared in this process
        await scheduler.stop()

    run(body())
