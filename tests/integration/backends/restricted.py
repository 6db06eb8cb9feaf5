"""What the least-privilege tests run against a store whose rights were cut to the
documented minimum (a PostgreSQL read/write role, a Redis ACL user): every call a running
scheduler and the one-shot commands make."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

from anarchon import AsyncScheduler, RunContext
from anarchon.backends.base import Backend
from anarchon.backends.capabilities import ValueStore

ROOT = Path(__file__).resolve().parents[3]


async def run_every_call(backend: Backend, instance_id: str) -> None:
    """Claims, heartbeats and finishes of a job every 0.2 s, a manual run, a pause and
    shared values through ``backend``; closes it."""
    scheduler = AsyncScheduler(backend, instance_id=instance_id, lease="2s",
                               heartbeat="0.3s", jitter=0)
    ran: list[int] = []
    done = asyncio.Event()

    async def tick(ctx: RunContext) -> None:
        ran.append(ctx.attempt)
        if len(ran) >= 3:
            done.set()

    scheduler.every("tick", "0.2s", tick)
    await scheduler.start()
    try:
        await scheduler.trigger("tick")
        await asyncio.wait_for(done.wait(), 10)
        await scheduler.pause("tick", by=f"{instance_id} test")
        assert isinstance(backend, ValueStore)
        assert await backend.swap_value("tick", "cursor", None, "1")
        assert await backend.read_value("tick", "cursor") == "1"
        assert await backend.swap_value("tick", "cursor", "1", "2")
        history = await scheduler.history("tick", 20)
        assert any(r.status == "success" for r in history)
        assert any(r.manual for r in history)
    finally:
        await scheduler.stop()
        await backend.close()


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    """``anarchon ARGS`` in a child process (no ``ANARCHON_BACKEND`` from the environment)."""
    return subprocess.run([sys.executable, "-m", "anarchon", *args], capture_output=True,
                          text=True, timeout=60, check=False, cwd=ROOT,
                          env={**os.environ, "ANARCHON_BACKEND": ""})
