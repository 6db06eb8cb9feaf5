"""One benchmark instance process: ``python -m benchmarks.member CONFIG_JSON``.

``mode="load"`` (scale and idle): registers ``jobs`` jobs, starts, prints ``ready``, reads
``go <t0> <t_end>`` from stdin, measures CPU/RSS/store calls over ``[t0, t_end)``, records
every handler start of a slot in that window, stops ``grace`` seconds after ``t_end`` and
writes a JSON result to ``result``.

``mode="handover"``: one long job whose handler waits for its abort signal and then
raises (so a graceful stop hands the run over); every start is appended to ``log`` as a
JSON line with wall-clock ``t``. Runs until SIGTERM/SIGINT, as ``Scheduler.run()`` does.

The worker records the jitter the engine drew for each slot by wrapping the engine's
``random`` module reference in this process (``random.uniform`` is called once per slot
in the job's loop task, and the run's tasks inherit that task's context).
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import os
import random
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

import anarchon.engine
from anarchon import AsyncScheduler, RunContext, Scheduler, from_url

from .common import usage
from .instrumented import counted_backend, delta

JITTER: contextvars.ContextVar[float | None] = contextvars.ContextVar("jitter", default=None)


class _RecordingRandom:
    """Stands in for the ``random`` module inside ``anarchon.engine``."""

    def uniform(self, a: float, b: float) -> float:
        value = random.uniform(a, b)
        JITTER.set(value)
        return value

    def __getattr__(self, name: str) -> Any:
        return getattr(random, name)


def _read_go() -> tuple[float, float]:
    line = sys.stdin.readline().split()
    if len(line) != 3 or line[0] != "go":
        raise SystemExit(f"expected 'go <t0> <t_end>', got {line!r}")
    return float(line[1]), float(line[2])


async def _sleep_until(wall: float) -> None:
    left = wall - time.time()
    while left > 0:
        await asyncio.sleep(min(left, 0.5))
        left = wall - time.time()


async def load(config: dict[str, Any]) -> None:
    setattr(anarchon.engine, "random", _RecordingRandom())  # noqa: B010 - no such attribute to mypy
    counted = counted_backend(config["store"], config["url"])
    scheduler = AsyncScheduler(counted.backend, instance_id=config["instance"],
                               **config.get("options", {}))
    window: list[float] = [0.0, float("inf")]
    starts: list[tuple[str, int, int, float, float | None]] = []

    async def handler(ctx: RunContext) -> None:
        now = time.time()
        if window[0] * 1000 <= ctx.slot < window[1] * 1000:
            starts.append((ctx.name, ctx.slot, ctx.attempt, now, JITTER.get()))

    add = getattr(scheduler, config["kind"])
    for i in range(config["jobs"]):
        add(f"job-{i}", config["when"], handler, **config.get("job_options", {}))
    errors: list[str] = []
    scheduler.on("error", lambda event: errors.append(repr(event.error)))
    await scheduler.start()
    print("ready", flush=True)
    t0, t_end = await asyncio.to_thread(_read_go)
    window[:] = [t0, t_end]
    await _sleep_until(t0)
    before, calls_before = usage(), counted.snapshot()
    await _sleep_until(t_end)
    after, calls_after = usage(), counted.snapshot()
    await _sleep_until(t_end + config.get("grace", 0.0))
    elapsed = after["wall"] - before["wall"]
    result = {
        "instance": config["instance"], "pid": os.getpid(), "seconds": elapsed,
        "cpu_s": after["cpu_s"] - before["cpu_s"], "peak_rss_mib": after["peak_rss_mib"],
        "counts": delta(calls_after, calls_before), "starts": starts, "errors": errors[:20],
        "error_count": len(errors),
    }
    # written before stop(): an overloaded instance may take long to stop
    await asyncio.to_thread(Path(config["result"]).write_text, json.dumps(result))
    await scheduler.stop(timeout=10)
    await counted.close()


def handover(config: dict[str, Any]) -> None:
    log = open(config["log"], "a", buffering=1)  # noqa: SIM115 - lives as long as we do

    def write(**fields: Any) -> None:
        fields.update(t=time.time(), instance=config["instance"])
        log.write(json.dumps(fields) + "\n")

    def handler(ctx: RunContext) -> None:
        write(kind="begin", slot=ctx.slot, attempt=ctx.attempt, reason=ctx.reason)
        ctx.signal.wait(3600)
        ctx.signal.raise_if_aborted()

    scheduler = Scheduler(from_url(config["url"]), instance_id=config["instance"],
                          **config.get("options", {}))
    scheduler.every(config["job"], config["when"], handler, **config.get("job_options", {}))
    # what Scheduler.run() does, plus a "ready" line once start() has returned
    stop_requested = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop_requested.set())
    try:
        scheduler.start()
        write(kind="ready")
        print("ready", flush=True)
        while not stop_requested.wait(1.0):
            pass
    finally:
        scheduler.stop(10)


def main() -> None:
    config: dict[str, Any] = json.loads(sys.argv[1])
    if config["mode"] == "load":
        asyncio.run(load(config))
    else:
        handover(config)


if __name__ == "__main__":
    main()
