"""Claims that fall behind are never lost silently (real SQLite store).

The store's clock is put two minutes ahead of the scheduler's, so every claim reaches
the store after ``slot + max_late``: each slot must be refused as ``late``, counted in
``jobs()``, emitted as a ``skip`` event, written to history as a ``skipped`` record, and
reported by one rate-limited WARNING.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from anarchon import AsyncScheduler, RunContext
from anarchon.backends.sqlite import SqliteBackend
from anarchon.clock import OffsetClock
from anarchon.events import Event
from tests.support import run, wait_until


def test_claims_behind_the_store_are_counted_and_warned(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    started: list[str] = []
    skips: list[Event] = []

    async def handler(ctx: RunContext) -> None:
        started.append(ctx.name)

    async def body() -> None:
        path = str(tmp_path / "store.db")
        backend = SqliteBackend(path, clock=OffsetClock(120.0))
        scheduler = AsyncScheduler(backend, instance_id="behind", lease=5, heartbeat=1)
        for name in ("a", "b"):
            scheduler.every(name, "1s", handler, max_late=1, catch_up=0)
        scheduler.on("skip", skips.append)
        await scheduler.start()
        try:
            await wait_until(lambda: len(skips) >= 4, 10, "four late slots")
            infos = {info.name: info for info in await scheduler.jobs()}
        finally:
            await scheduler.stop()  # waits for the skip records being written
        reader = SqliteBackend(path)
        await reader.open()
        try:
            records = [r for name in ("a", "b") for r in await reader.history(name, 100)]
        finally:
            await reader.close()
        assert {(r.status, r.reason, r.attempt) for r in records} == {("skipped", "late", 0)}
        assert sorted((r.name, r.slot) for r in records) == sorted(
            {(e.name, e.slot) for e in skips})  # each late slot once
        assert started == []
        assert {e.reason for e in skips} == {"late"}
        counted = infos["a"].skipped.get("late", 0) + infos["b"].skipped.get("late", 0)
        assert 4 <= counted <= len(skips)  # every late skip is counted (more came later)

    with caplog.at_level(logging.WARNING, logger="anarchon"):
        run(body())
    [warning] = [r.getMessage() for r in caplog.records
                 if r.levelno == logging.WARNING and "falling behind" in r.getMessage()]
    assert "ms after their slot" in warning and "given up as late" in warning
