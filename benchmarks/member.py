"""One instance of the scale and idle benchmarks: ``python -m benchmarks.member CONFIG_JSON``.

Started by :func:`tests.harness.procs.spawn` (``mode="load"``): registers ``jobs`` jobs,
starts, prints ``ready``, reads ``go <t0> <t_end>`` from stdin, measures CPU/RSS/store
calls over ``[t0, t_end)``, records every handler start of a slot in that window, stops
``grace`` seconds after ``t_end`` and writes a JSON result to ``result``. (The hand-over
benchmark runs the test clusters' instance, :mod:`tests.harness.worker`.)

The worker records, for each slot, the claim delay the engine chose (its jitter draw,
rounded up to the claim grid when claims are batched) and the raw draw, by wrapping
``anarchon.engine.plan.claim_delay_ms`` (as the engine calls it) and its ``random`` in this
process; the handler looks its slot up. Entries of slots another instance won are
pruned as time passes.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anarchon.engine.plan
import anarchon.engine.planner
from anarchon import AsyncScheduler, RunContext

from .common import usage
from .instrumented import counted_backend, delta

#: when this process began (start-up time is measured from here)
BEGAN = time.monotonic()

#: slot -> {job name: (raw draw ms, applied delay ms)}; the last draw of this process
DELAYS: dict[int, dict[str, tuple[float, float]]] = {}
_LAST_DRAW = [0.0]


class _RecordingRandom:
    """Stands in for the ``random`` module inside ``anarchon.engine.plan``."""

    def uniform(self, a: float, b: float) -> float:
        value = random.uniform(a, b)
        _LAST_DRAW[0] = value * 1000  # the engine draws in seconds
        return value

    def __getattr__(self, name: str) -> Any:
        return getattr(random, name)


def _recording_delay(original: Callable[..., float]) -> Callable[..., float]:
    def claim_delay_ms(job: Any, slot: int, following: int | None, grid_ms: float) -> float:
        applied = original(job, slot, following, grid_ms)
        by_job = DELAYS.get(slot)
        if by_job is None:
            for old in [s for s in DELAYS if s < slot - 60_000]:
                del DELAYS[old]  # slots long past: won elsewhere
            by_job = DELAYS[slot] = {}
        by_job[job.name] = (_LAST_DRAW[0], applied)
        return applied
    return claim_delay_ms


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
    # the draw is made in anarchon.engine.plan; the engine calls its own imported name
    setattr(anarchon.engine.plan, "random", _RecordingRandom())  # noqa: B010 - no such attribute to mypy
    setattr(anarchon.engine.planner, "claim_delay_ms",  # noqa: B010 - not exported to mypy
            _recording_delay(anarchon.engine.plan.claim_delay_ms))
    if config.get("django"):
        from tests.harness import django_stores

        django_stores.use(config["django"])
    counted = counted_backend(config["store"], config["url"])
    scheduler = AsyncScheduler(counted.backend, instance_id=config["instance"],
                               **config.get("options", {}))
    window: list[float] = [float("inf"), float("inf")]  # nothing counts before "go"
    starts: list[tuple[str, int, int, float, float | None, float | None]] = []

    async def handler(ctx: RunContext) -> None:
        now = time.time()
        if window[0] * 1000 <= ctx.slot < window[1] * 1000:
            drawn, applied = DELAYS.get(ctx.slot, {}).pop(ctx.name, (None, None))
            starts.append((ctx.name, ctx.slot, ctx.attempt, now, drawn, applied))

    add = getattr(scheduler, config["kind"])
    adding = time.monotonic()
    for i in range(config["jobs"]):
        add(f"job-{i}", config["when"], handler, **config.get("job_options", {}))
    errors: list[str] = []
    scheduler.on("error", lambda event: errors.append(repr(event.error)))
    # slots of the window this instance gave up (late, overlap), with the reason
    given_up: list[tuple[str | None, int | None, str | None]] = []

    def skipped(event: Any) -> None:
        if event.reason != "taken" and window[0] * 1000 <= (event.slot or 0) < window[1] * 1000:
            given_up.append((event.name, event.slot, event.reason))

    scheduler.on("skip", skipped)
    starting = time.monotonic()
    await scheduler.start()
    startup = {"startup_s": round(time.monotonic() - BEGAN, 2),
               "add_jobs_s": round(starting - adding, 2),
               "start_s": round(time.monotonic() - starting, 2)}
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
        "error_count": len(errors), "given_up": given_up, **startup,
    }
    # written before stop(): an overloaded instance may take long to stop
    await asyncio.to_thread(Path(config["result"]).write_text, json.dumps(result))
    await scheduler.stop(timeout=10)
    await counted.close()


def main() -> None:
    config: dict[str, Any] = json.loads(sys.argv[1])
    if config["mode"] != "load":
        raise SystemExit(f"unknown mode {config['mode']!r}: the member only measures load")
    asyncio.run(load(config))


if __name__ == "__main__":
    main()
