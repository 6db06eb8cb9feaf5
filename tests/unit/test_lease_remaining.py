"""``AsyncScheduler.lease_remaining``: how long this instance is known to hold a run.

Real SQLite store and real clock (a 1 s job, lease 2 s, heartbeat 0.2 s); the handler asks
from its own thread, as ``anarchon_celery``'s publish fence does. Waits poll with deadlines.
"""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

import anarchon
from tests.unit._doubles import MemoryClaimBackend

DEADLINE = 10.0


async def _until(check: Any, what: str) -> Any:
    deadline = time.monotonic() + DEADLINE
    while not (result := await check()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.02)
    return result


def test_lease_remaining_follows_the_held_lease(tmp_path: Path) -> None:
    lease = 2.0
    seen: dict[str, Any] = {}
    done = threading.Event()

    def handler(ctx: anarchon.RunContext) -> None:
        engine = scheduler
        first = engine.lease_remaining(ctx.name, ctx.slot)
        seen["first"] = first
        seen["same_attempt"] = engine.lease_remaining(ctx.name, ctx.slot, ctx.attempt)
        seen["other_attempt"] = engine.lease_remaining(ctx.name, ctx.slot, ctx.attempt + 1)
        seen["other_slot"] = engine.lease_remaining(ctx.name, ctx.slot + 1000)
        seen["other_job"] = engine.lease_remaining("nope", ctx.slot)
        # time passes: the value shrinks, then a heartbeat renews the lease
        deadline = time.monotonic() + DEADLINE
        low = first
        while True:
            now = engine.lease_remaining(ctx.name, ctx.slot)
            assert now is not None and time.monotonic() < deadline
            if low is not None and now > low + 0.05:
                seen["renewed"] = (low, now)
                break
            low = min(low, now) if low is not None else now
            time.sleep(0.01)
        seen["slot"] = ctx.slot
        done.set()

    async def main() -> None:
        scheduler.every("tick", 1, handler, max_attempts=1)
        assert scheduler.lease_remaining("tick", 0) is None  # not started: no keeper
        await scheduler.start()
        try:
            await _until(lambda: asyncio.sleep(0, done.is_set()), "a run of tick")

            async def recorded() -> bool:
                records = await scheduler.history("tick", 5)
                return any(r.slot == seen["slot"] and r.status == "success" for r in records)

            await _until(recorded, "the run recorded")

            async def released() -> bool:
                return scheduler.lease_remaining("tick", seen["slot"]) == 0.0

            # finished: once its finish returned (the record is visible a moment before
            # the run leaves this instance's table), this instance no longer holds it
            await _until(released, "the finished run no longer held here")
        finally:
            await scheduler.stop()

    scheduler = anarchon.AsyncScheduler(anarchon.SqliteBackend(str(tmp_path / "x.db")),
                                        lease=lease, heartbeat=0.2, jitter=0)
    asyncio.run(main())
    assert isinstance(seen["first"], float) and 0 < seen["first"] <= lease
    assert seen["same_attempt"] is not None and 0 < seen["same_attempt"] <= lease
    assert seen["other_attempt"] == 0.0
    assert seen["other_slot"] == 0.0
    assert seen["other_job"] == 0.0
    low, renewed = seen["renewed"]
    assert renewed > low and renewed <= lease


def test_lease_remaining_is_none_without_leases() -> None:
    seen: list[float | None] = []
    done = threading.Event()

    def handler(ctx: anarchon.RunContext) -> None:
        seen.append(scheduler.lease_remaining(ctx.name, ctx.slot))
        done.set()

    async def main() -> None:
        await scheduler.start()
        try:
            await _until(lambda: asyncio.sleep(0, done.is_set()), "a run of tick")
        finally:
            await scheduler.stop()

    scheduler = anarchon.AsyncScheduler(MemoryClaimBackend(), jitter=0)
    scheduler.every("tick", 1, handler)
    asyncio.run(main())
    assert seen == [None]
