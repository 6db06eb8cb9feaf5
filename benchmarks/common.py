"""Small helpers shared by every benchmark: statistics, resource usage, counting calls."""

from __future__ import annotations

import functools
import math
import resource
import statistics
import time
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

#: backend methods that talk to the store (what ``count_calls`` counts)
STORE_METHODS = ("register", "claim", "claim_many", "confirm", "finish", "finish_many",
                 "heartbeat", "release", "unfinished", "take_triggers", "poll",
                 "read_controls", "change_control", "change_log", "offer_handlers",
                 "start_manual", "finish_manual", "history", "known_jobs")


def percentile(values: Iterable[float], q: float) -> float:
    """The ``q`` quantile (0..1) by nearest rank; NaN for no values."""
    ordered = sorted(values)
    if not ordered:
        return math.nan
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def ms(value: float) -> float | None:
    """Seconds -> milliseconds rounded to 3 decimals; None for NaN."""
    return None if math.isnan(value) else round(value * 1000, 3)


def summary_ms(samples: list[float]) -> dict[str, float | None]:
    """Median, p99 and max of samples (seconds) in milliseconds."""
    median = statistics.median(samples) if samples else math.nan
    return {"p50_ms": ms(median), "p99_ms": ms(percentile(samples, 0.99)),
            "max_ms": ms(max(samples) if samples else math.nan)}


def usage() -> dict[str, float]:
    """CPU seconds (user + system, all threads) and peak RSS in MiB of this process.

    Peak RSS is ``VmHWM`` from ``/proc/self/status`` where there is one: Linux keeps
    ``ru_maxrss`` across ``fork``+``exec``, so a child would report its parent's peak.
    """
    ru = resource.getrusage(resource.RUSAGE_SELF)
    peak = ru.ru_maxrss / 1024
    try:
        with open("/proc/self/status") as handle:
            for line in handle:
                if line.startswith("VmHWM:"):
                    peak = int(line.split()[1]) / 1024
    except (OSError, ValueError):
        pass
    return {"cpu_s": ru.ru_utime + ru.ru_stime, "peak_rss_mib": peak,
            "wall": time.monotonic()}


def count_calls(backend: Any, counts: Counter[str] | None = None) -> Counter[str]:
    """Count calls to the store methods of one backend instance (wraps them in place).

    This only counts: every call still goes to the real store.
    """
    tally: Counter[str] = counts if counts is not None else Counter()
    for name in STORE_METHODS:
        method = getattr(backend, name, None)
        if method is None:
            continue
        setattr(backend, name, _counted(method, name, tally))
    return tally


def _counted(method: Callable[..., Any], name: str, tally: Counter[str]) -> Callable[..., Any]:
    @functools.wraps(method)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        tally[name] += 1
        return await method(*args, **kwargs)

    return wrapper


def count_redis_commands(client: Any, tally: Counter[str]) -> Any:
    """Count round trips of a redis-py/valkey-py asyncio client: one per command sent
    outside a pipeline, one per pipeline ``execute``. Returns the client."""
    execute = client.execute_command

    async def execute_command(*args: Any, **options: Any) -> Any:
        tally["round_trips"] += 1
        tally[f"cmd:{str(args[0]).upper()}"] += 1
        return await execute(*args, **options)

    make_pipeline = client.pipeline

    def pipeline(*args: Any, **kwargs: Any) -> Any:
        pipe = make_pipeline(*args, **kwargs)
        run = pipe.execute

        async def execute_pipe(*a: Any, **k: Any) -> Any:
            tally["round_trips"] += 1
            tally["cmd:PIPELINE"] += 1
            return await run(*a, **k)

        pipe.execute = execute_pipe
        return pipe

    client.execute_command = execute_command
    client.pipeline = pipeline
    return client
