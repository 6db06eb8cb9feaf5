"""Small helpers shared by every benchmark: statistics, resource usage, counting calls."""

from __future__ import annotations

import contextvars
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
                 "heartbeat", "heartbeat_live", "leave", "instances", "release",
                 "unfinished", "take_triggers", "poll",
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


#: set while a call counted with ``outermost`` runs (its nested calls are not counted)
_INSIDE: contextvars.ContextVar[bool] = contextvars.ContextVar("inside_store_call",
                                                               default=False)


def count_calls(backend: Any, counts: Counter[str] | None = None,
                outermost: bool = False) -> Counter[str]:
    """Count calls to the store methods of one backend instance (wraps them in place).

    With ``outermost``, a call a store method makes to another of its own (SQLite's and
    PostgreSQL's ``claim`` is one ``claim_many``) is not counted: the count is the calls
    the engine made. This only counts: every call still goes to the real store.
    """
    tally: Counter[str] = counts if counts is not None else Counter()
    for name in STORE_METHODS:
        method = getattr(backend, name, None)
        if method is None:
            continue
        setattr(backend, name, _counted(method, name, tally, outermost))
    return tally


def count_with_clones(backend: Any, tally: Counter[str], outermost: bool = False) -> None:
    """`count_calls` on ``backend`` and on every clone its ``lease_clone()`` makes (the
    lease keeper's connection: its heartbeats go there on SQLite, PostgreSQL and a Redis
    built from a URL), into the same ``tally``."""
    count_calls(backend, tally, outermost)
    clone = getattr(backend, "lease_clone", None)
    if callable(clone):
        def counted_clone() -> Any:
            copy = clone()
            if copy is not None:
                count_calls(copy, tally, outermost)
            return copy

        setattr(backend, "lease_clone", counted_clone)  # noqa: B010 - a method to mypy


def _counted(method: Callable[..., Any], name: str, tally: Counter[str],
             outermost: bool) -> Callable[..., Any]:
    @functools.wraps(method)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        if not outermost:
            tally[name] += 1
            return await method(*args, **kwargs)
        if _INSIDE.get():
            return await method(*args, **kwargs)
        tally[name] += 1
        token = _INSIDE.set(True)
        try:
            return await method(*args, **kwargs)
        finally:
            _INSIDE.reset(token)

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
