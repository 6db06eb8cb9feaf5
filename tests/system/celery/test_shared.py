"""Schedules that decide by their own ``is_due``, on three real beats: the cluster
publishes them as often as one stock beat does (a shared ``last_run_at`` with
compare-and-set in the store), never once per beat.

Three anarchon beats and, beside them, one stock beat on the same schedules over the same
window of at least 20 s; publishes are counted from ``after_task_publish``.
"""

from __future__ import annotations

import itertools
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.harness.celery.cluster import CeleryCluster, broker_available
from tests.system.celery.test_beats import record, require, store

SCHEDULER = {"lease": 2.0, "heartbeat": 0.3, "jitter": 0.2}
WINDOW = 20.0
#: name -> (custom schedule kind, seconds)
KINDS = {"gate": ("gate", 2), "relative": ("relative", 3), "estimate": ("cron_estimate", 2)}
#: each publish carries the header ``entry`` (stock beat has no anarchon headers)
ENTRIES: dict[str, Any] = {name: {"task": "t.noop", "custom": kind, "every": every,
                                  "options": {"headers": {"entry": name}}}
                           for name, (kind, every) in KINDS.items()}


def in_window(cluster: CeleryCluster, task_job: str, start: float) -> list[float]:
    """Publish times of entry ``task_job`` within ``[start, start + WINDOW)``."""
    return sorted(r["t"] for r in cluster.records("publish", entry=task_job)
                  if start <= r["t"] < start + WINDOW)


@pytest.mark.parametrize("backend", ["redis", "postgres"])
def test_own_is_due_schedules_publish_as_often_as_one_stock_beat(tmp_path: Path,
                                                                   backend: str) -> None:
    require("the Redis broker", broker_available())
    spec = store(backend)
    require(backend, spec.unavailable())
    ns = "cx_" + uuid.uuid4().hex[:10]
    ours = CeleryCluster(tmp_path / "ours", {"queue": ns, "backend": spec.url_for(ns),
                                             "scheduler": SCHEDULER, "entries": ENTRIES,
                                             "report_entries": True})
    stock = CeleryCluster(tmp_path / "stock", {"queue": ns + "-stock", "entries": ENTRIES})
    for cluster in (ours, stock):
        cluster.tmp.mkdir()
    names = ["a", "b", "c"]
    try:
        for name in names:
            ours.beat(name)
        stock.beat("s", scheduler="")
        ours.wait_for(lambda: all("anarchon_celery: 4 entries" in ours.output(n)
                                  for n in names), 60, "three beats running")
        stock.wait_for(lambda: stock.records("publish"), 60, "stock beat publishing")
        start = time.time() + 1
        ours.wait_for(lambda: time.time() > start + WINDOW + 0.5, WINDOW + 10, "the window")
    finally:
        ours.stop_all()
        stock.stop_all()
    counts: dict[str, dict[str, int]] = {}
    for entry, (_, every) in KINDS.items():
        mine, theirs = in_window(ours, entry, start), in_window(stock, entry, start)
        counts[entry] = {"three_beats": len(mine), "one_stock_beat": len(theirs)}
        assert abs(len(mine) - len(theirs)) <= 1, (entry, counts[entry])
        assert len(mine) >= WINDOW / every - 2, (entry, mine)
        gaps = [b - a for a, b in itertools.pairwise(mine)]
        assert min(gaps) >= every - 0.3, (entry, gaps)  # never twice for one due
        assert len({r["pid"] for r in ours.records("publish", entry=entry)}) >= 1
    # every beat's entry shows the cluster's last run and count, not only the winner's
    total = len(ours.records("publish", entry="gate"))
    for name in names:
        reports = ours.records("entry", job="gate", pid=ours.procs[name].pid)
        assert reports and reports[-1]["count"] >= total - 1, (name, reports[-1:], total)
    record(f"own_is_due_publishes_in_{WINDOW:g}s.{backend}", counts)
