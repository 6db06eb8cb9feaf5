"""Runs situations per strategy and measures each run from logs and history."""

from __future__ import annotations

import asyncio
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path

import anarchon_lab.scenarios.measure as measure
from anarchon import AsyncScheduler
from anarchon.history import RunRecord

from .harness import Cluster, Records
from .measure import Measurement
from .situations import BY_KEY, HEARTBEAT, JITTER, JOB, LEASE, SITUATIONS, Situation, Stage
from .stores import Store, build_backend, cleanup

Progress = Callable[[str], None]


async def read_history(url: str, name: str = JOB, count: int = 200) -> list[RunRecord]:
    """The job's history as any process sees it (a scheduler with no jobs)."""
    scheduler = AsyncScheduler(build_backend(url))
    try:
        return await scheduler.history(name, count)
    finally:
        await scheduler.stop()


def run_situation(store: Store, strategy: str, situation: Situation,
                  workdir: Path | None = None) -> Measurement:
    """Drive ``situation`` with three instances on ``strategy`` and measure it."""
    lease = strategy == "lease"
    namespace = f"sc_{situation.key}_{strategy}_{uuid.uuid4().hex[:6]}".replace("-", "_")
    url = store.url(strategy, namespace)
    folder = Path(workdir or tempfile.mkdtemp(prefix="anarchon-scenario-"))
    options = dict(jitter=JITTER)
    if lease:
        options.update(lease=LEASE, heartbeat=HEARTBEAT)
    cluster = Cluster(url, folder / f"{namespace}.jsonl", [situation.job(lease)], options,
                      stop_timeout=3)
    stage = Stage(cluster, lease)
    result = Measurement(situation.key, strategy, store.kind)
    started = time.monotonic()
    try:
        situation.drive(stage)
    except TimeoutError as exc:
        result.error = str(exc)
    except BaseException:
        cluster.stop_all(graceful=False)
        raise
    try:
        # the log first, then history: a run ending in between still counts as live
        records, live_pids, now = cluster.records(), cluster.live_pids(), time.time()
        _measure(result, stage, records, live_pids, now, asyncio.run(read_history(url)))
    except Exception as exc:  # the store itself failed: report it in the row
        result.error = result.error or f"reading history failed: {exc}"
    finally:
        cluster.stop_all(graceful=False)
        asyncio.run(cleanup(url, namespace))
    result.elapsed = time.monotonic() - started
    return result



def _measure(result: Measurement, stage: Stage, records: Records, live_pids: set[int],
             now: float, history: Sequence[RunRecord]) -> None:
    spans = measure.spans(records, JOB, now)
    frozen = measure.frozen_intervals(records, now)
    live = measure.live_runs(spans, live_pids)
    skipped = measure.skipped(records, JOB)
    result.max_concurrent, result.overlap_seconds = measure.concurrency(spans, frozen)
    result.starts_per_slot = measure.starts_per_slot(spans)
    result.left_running = measure.left_running(history, live)
    result.slots_lost = measure.slots_lost(stage.expected, history, live, skipped)
    result.skipped_overlap = len(skipped & stage.expected) if stage.expected else len(skipped)
    result.lost_events = measure.lost_events(records, JOB)
    result.notes = list(stage.notes)
    if stage.affected is not None and (stage.fault_at or stage.delay_from):
        since = stage.delay_from or stage.fault_at or 0.0
        later = [s.begin for s in spans if s.slot == stage.affected and s.begin > since]
        result.takeover_delay = min(later) - since if later else None


def run_all(store: Store, strategies: Sequence[str] | None = None,
            only: Sequence[str] | None = None, progress: Progress | None = None
            ) -> list[Measurement]:
    """Every situation (or ``only`` those keys) for every strategy of ``store``."""
    chosen = [BY_KEY[key] for key in only] if only else list(SITUATIONS)
    rows = []
    for situation in chosen:
        for strategy in strategies or store.strategies:
            if progress:
                progress(f"{store.kind:8} {strategy:9} {situation.title} …")
            row = run_situation(store, strategy, situation)
            if progress:
                progress(f"{store.kind:8} {strategy:9} {situation.title}: {summary(row)}")
            rows.append(row)
    return rows


def summary(row: Measurement) -> str:
    """One line: the five numbers, or the error."""
    delay = "-" if row.takeover_delay is None else f"{row.takeover_delay:.1f}s"
    text = (f"concurrent {row.max_concurrent}, starts/slot {row.starts_per_slot}, "
            f"left running {row.left_running}, lost {row.slots_lost}, takeover {delay} "
            f"({row.elapsed:.0f}s)")
    return text + (f" ERROR: {row.error}" if row.error else "")


__all__ = ["Measurement", "read_history", "run_all", "run_situation", "summary"]
