"""Heartbeat cost: store round trips per heartbeat with 1, 100, 1,000 runs in flight.

One scheduler (one instance) holds ``n`` runs at once: ``n`` jobs share one slot (an
hourly grid shifted so the slot is a moment away) and each handler waits for its abort
signal. Once all ``n`` have started, store calls are counted over a window: the
LeaseKeeper should send ONE ``heartbeat`` call per beat for all held runs, and on
Redis/Valkey that call should be one round trip.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path
from typing import Any

from anarchon import AsyncScheduler, RunContext
from tests.harness.cleanup import cleanup
from tests.harness.rig import backend_url

from .instrumented import commandstats, commandstats_total, counted_backend, delta

LEASE, HEARTBEAT = 3.0, 0.5


async def measure(store: str, base: str | None, workdir: Path, runs: int,
                  window: float) -> dict[str, Any]:
    """One row: ``runs`` in flight on one instance, counted for ``window`` seconds."""
    namespace = f"hb{uuid.uuid4().hex[:8]}"
    url = backend_url(store, base, namespace, workdir)
    counted = counted_backend(store, url)
    scheduler = AsyncScheduler(counted.backend, lease=LEASE, heartbeat=HEARTBEAT)
    started = 0
    all_started = asyncio.Event()

    async def handler(ctx: RunContext) -> None:
        nonlocal started
        started += 1
        if started == runs:
            all_started.set()
        await ctx.signal.wait_async()

    hour = 3_600_000
    offset_ms = (int(time.time() * 1000) + 500) % hour
    names = [f"hb-{i}" for i in range(runs)]
    for name in names:
        # the default jitter (2 s) spreads the n claims; with jitter=0 the n claims go out
        # at once and redis-py's pool (100 connections, no waiting) refuses the rest
        # (a shorter jitter for fewer runs only makes the run start sooner)
        scheduler.every(name, "1h", handler, offset=offset_ms / 1000, catch_up=0,
                        jitter=min(2.0, runs / 500))
    try:
        await scheduler.start()
        await asyncio.wait_for(all_started.wait(), 60)
        await asyncio.sleep(HEARTBEAT)  # let one beat pass with all runs held
        redis_url = base if base and store in ("redis", "valkey") else None
        server_before = await commandstats(redis_url) if redis_url else None
        before = counted.snapshot()
        began = time.monotonic()
        await asyncio.sleep(window)
        after = counted.snapshot()
        elapsed = time.monotonic() - began
        server_after = await commandstats(redis_url) if redis_url else None
    finally:
        await scheduler.stop(timeout=30)
        await counted.close()
        await cleanup(store, base, namespace, names)
    diff = delta(after, before)
    # with liveness records the keeper beats through heartbeat_live (same round trip)
    beats = diff.get("call:heartbeat", 0) + diff.get("call:heartbeat_live", 0)
    calls = sum(v for k, v in diff.items() if k.startswith("call:"))
    trips = diff.get("round_trips")
    server = commandstats_total(server_before, server_after)
    return {
        "backend": store, "runs_in_flight": runs, "window_s": round(elapsed, 2),
        "heartbeat": HEARTBEAT,
        "heartbeat_calls_per_s": round(beats / elapsed, 2),
        "store_calls_per_s": round(calls / elapsed, 2),
        "round_trips_per_s": round(trips / elapsed, 2) if trips is not None else None,
        "round_trips_per_heartbeat": round((trips - (calls - beats)) / beats, 2)
        if trips is not None and beats else None,
        "server_commands_per_s": round(server / elapsed, 1) if server is not None else None,
        "calls": {k.removeprefix("call:"): v for k, v in diff.items() if k.startswith("call:")},
    }
