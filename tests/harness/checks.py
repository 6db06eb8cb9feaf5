"""What the fault tests assert, computed from the shared log and the store's history."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import defaultdict
from typing import Any

from anarchon_lab.scenarios.measure import Span, spans
from anarchon_lab.scenarios.runner import read_history

from anarchon import RunRecord
from tests.harness.cluster import Cluster, Records, first


def begins(records: Records, job: str, **match: Any) -> list[dict[str, Any]]:
    return [r for r in records if r["kind"] == "begin" and r.get("job") == job
            and all(r.get(k) == v for k, v in match.items())]


def events(records: Records, type_: str, job: str | None = None) -> list[dict[str, Any]]:
    return [r for r in records if r["kind"] == "event" and r["type"] == type_
            and (job is None or r.get("job") == job)]


def history(url: str, job: str, count: int = 1000) -> list[RunRecord]:
    return asyncio.run(read_history(url, job, count))


def concurrent_same_slot(records: Records, job: str) -> list[tuple[Span, Span]]:
    """Pairs of executions of one slot that overlapped in time (must be empty)."""
    by_slot: dict[int, list[Span]] = defaultdict(list)
    for span in spans(records, job, time.time()):
        by_slot[span.slot].append(span)
    return [(a, b) for runs in by_slot.values()
            for a, b in itertools.combinations(sorted(runs, key=lambda s: s.begin), 2)
            if b.begin < a.end]


def decided_again(cluster: Cluster, run1: dict[str, Any], since: float
                  ) -> tuple[dict[str, Any], dict[str, Any]]:
    """The runner of ``run1`` (job ``once``) is told its run is gone (``since``: when the
    store lost it), stops it, and the slot starts once more and succeeds: the abort and the
    new begin."""
    fired = cluster.wait_for(first("abort", job="once", pid=run1["pid"]), 10,
                             "the runner told its run is gone")
    assert fired["signal"] == "lost"
    again = cluster.wait_for(
        lambda lines: [r for r in begins(lines, "once") if r["t"] > since], 15,
        "the slot claimed and started again")[0]
    assert again["slot"] == run1["slot"] and again["reason"] == "scheduled"
    assert again["t"] >= fired["t"]
    cluster.wait_for(first("event", type="success", job="once"), 15, "its success")
    return fired, again


def told_gone(records: Records) -> list[str]:
    """The instances that logged that the store has no record of their run."""
    return [r["instance"] for r in records
            if r["kind"] == "log" and "no record of this run" in r["msg"]]
