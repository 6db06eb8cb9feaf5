"""Observability on or off in one benchmark process, and the scheduler process that
``benchmarks.metrics_cost`` measures (``python -m benchmarks.observed_member CONFIG_JSON``).

``off``: ``metrics=False``, no liveness record (the lease keeper is built without one, as
on a store that keeps none) and no spans. ``on``: ``metrics=True``, the liveness record
(the default on a lease store) and an ``anarchon.run`` span per run through an
OpenTelemetry SDK tracer provider whose processor hands every ended span to an exporter
that counts and drops it (`DroppingExporter`). ``metrics``, ``liveness``, ``spans``: that
one alone (`MODES`).

The process (``kind`` ``load`` or ``idle``) registers ``jobs`` jobs (``load``: every second;
``idle``: once a year), starts, lets ``warmup`` seconds pass, then measures ``seconds``:
CPU (user + system, every thread), runs started, slots skipped as late, store calls by
method (the backend's and its lease connection's, under the metrics' timing wrapper),
spans exported; prints one JSON line.
"""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from collections import Counter
from collections.abc import Sequence
from typing import Any

import anarchon.engine.lease_keeper
from anarchon import AsyncScheduler, RunContext, from_url
from anarchon.backends.base import Backend

from .common import count_with_clones, usage

#: what each mode turns on
MODES: dict[str, frozenset[str]] = {
    "off": frozenset(), "on": frozenset({"metrics", "liveness", "spans"}),
    "metrics": frozenset({"metrics"}), "liveness": frozenset({"liveness"}),
    "spans": frozenset({"spans"})}


class DroppingExporter:
    """An OpenTelemetry span exporter that counts the spans it is given and drops them."""

    def __init__(self) -> None:
        self.spans = 0

    def export(self, spans: Sequence[Any]) -> Any:
        from opentelemetry.sdk.trace.export import SpanExportResult

        self.spans += len(spans)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True


_EXPORTERS: list[DroppingExporter] = []


def tracing_on(batch: bool) -> DroppingExporter:
    """Install the process's global SDK tracer provider (before any scheduler is built;
    once: later calls return the first exporter): a batch processor as in production
    (``batch``), else a simple one that exports each span as it ends (its cost falls
    where the span ends)."""
    if _EXPORTERS:
        return _EXPORTERS[0]
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

    exporter = DroppingExporter()
    provider = TracerProvider()
    processor = BatchSpanProcessor if batch else SimpleSpanProcessor
    provider.add_span_processor(processor(exporter))  # type: ignore[arg-type]
    trace.set_tracer_provider(provider)
    _EXPORTERS.append(exporter)
    return exporter


def liveness_off() -> None:
    """Lease keepers built from now on in this process keep no liveness record."""
    setattr(anarchon.engine.lease_keeper, "liveness_for",  # noqa: B010 - private to mypy
            lambda *args: None)


def observed(backend: Backend, features: frozenset[str], **options: Any) -> AsyncScheduler:
    """A scheduler with the ``metrics`` and ``spans`` of ``features`` (the liveness
    record is the process's choice, see `liveness_off`)."""
    scheduler = AsyncScheduler(backend, metrics="metrics" in features, **options)
    if "spans" not in features:
        scheduler.observer.spans = None
    return scheduler


async def member(config: dict[str, Any]) -> dict[str, Any]:
    features = MODES[config["mode"]]
    exporter = tracing_on(batch=True) if "spans" in features else None
    if "liveness" not in features:
        liveness_off()
    backend = from_url(config["url"])
    calls: Counter[str] = Counter()
    count_with_clones(backend, calls, outermost=True)  # under the scheduler's timing wrapper
    scheduler = observed(backend, features, jitter=config.get("jitter", 0.5),
                         instance_id=f"{config['kind']}-{uuid.uuid4().hex[:6]}",
                         **config.get("options", {}))
    seen: Counter[str] = Counter()

    def run(ctx: RunContext) -> None:
        seen["runs"] += 1

    scheduler.on("skip", lambda event: seen.update([f"skip:{event.reason}"]))
    scheduler.on("error", lambda event: seen.update(["errors"]))
    prefix = uuid.uuid4().hex[:6]
    for index in range(config["jobs"]):
        if config["kind"] == "load":
            scheduler.every(f"m{prefix}-{index}", "1s", run)
        else:
            scheduler.cron(f"i{prefix}-{index}", "0 0 1 1 *", run, catch_up=0)
    await scheduler.start()
    await asyncio.sleep(config["warmup"])  # past start-up and the first slots
    before, counts, calls_before = usage(), Counter(seen), Counter(calls)
    await asyncio.sleep(config["seconds"])
    after = usage()
    window_calls = Counter(calls)
    window_calls.subtract(calls_before)
    runs = seen["runs"] - counts["runs"]
    await scheduler.stop()
    if exporter is not None:
        from opentelemetry import trace

        trace.get_tracer_provider().force_flush()  # type: ignore[attr-defined]
    wall = after["wall"] - before["wall"]
    cpu = after["cpu_s"] - before["cpu_s"]
    return {"mode": config["mode"], "seconds": round(wall, 2),
            "cpu_pct": round(100 * cpu / wall, 2),
            "cpu_ms_per_run": round(1000 * cpu / runs, 4) if runs else None,
            "runs": runs, "late": seen["skip:late"] - counts["skip:late"],
            "errors": seen["errors"] - counts["errors"],
            "calls": {k: v for k, v in sorted(window_calls.items()) if v},
            "runs_total": seen["runs"],
            "spans_total": exporter.spans if exporter is not None else 0}


def main() -> None:
    print(json.dumps(asyncio.run(member(json.loads(sys.argv[1])))))


if __name__ == "__main__":
    main()
