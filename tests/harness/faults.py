"""The fault suite's clusters of :mod:`tests.harness.worker` processes (issue 15's timings)
and what its tests read back from the shared log."""

from __future__ import annotations

import shutil
import time
from collections import Counter
from pathlib import Path
from typing import Any

from tests.harness.checks import begins
from tests.harness.cluster import Cluster, Records, WorkerCluster
from tests.system.faults.conftest import missing

#: the timings of issue 15's findings
LEASE, HEARTBEAT, JITTER, MAX_LATE = 2.0, 0.3, 0.2, 60.0
OPTIONS = dict(lease=LEASE, heartbeat=HEARTBEAT, jitter=JITTER)
INSTANCES = ("a", "b", "c")


def make_workers(made: list[Cluster], url: str, tmp_path: Path, jobs: list[dict[str, Any]],
                 **options: Any) -> WorkerCluster:
    """A :class:`~tests.harness.cluster.WorkerCluster` with the issue's timings
    (``options`` override them), added to ``made`` (the ``clusters`` fixture, which
    SIGKILLs them at teardown)."""
    cluster = WorkerCluster(url, tmp_path / f"log{len(made)}.jsonl", jobs,
                            {**OPTIONS, **options}, stop_timeout=5)
    made.append(cluster)
    return cluster


def tick(duration: float = 0.2, **options: Any) -> dict[str, Any]:
    """The issue's job: every 1 s, ``max_late`` 60 s."""
    return dict(kind="every", name="tick", when="1s", duration=duration,
                options=dict(max_late=MAX_LATE, **options))


def starts_per_slot(records: Records, job: str) -> Counter[int]:
    return Counter(r["slot"] for r in begins(records, job))


def duplicates(records: Records, job: str) -> dict[int, int]:
    """Slots whose handler started more than once (any attempt): slot -> starts."""
    return {slot: n for slot, n in starts_per_slot(records, job).items() if n > 1}


def skips(records: Records, job: str, reason: str) -> list[int]:
    return sorted(r["slot"] for r in records if r["kind"] == "event" and r["type"] == "skip"
                  and r["job"] == job and r["reason"] == reason)


def logs(records: Records, level: str = "WARNING") -> list[dict[str, Any]]:
    """``anarchon`` logger lines at ``level`` or above."""
    order = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
    return [r for r in records if r["kind"] == "log"
            and order.index(r["level"]) >= order.index(level)]


def sleep_until_fraction(fraction: float) -> float:
    """Sleep until the wall clock's fraction of a second is ``fraction``; returns the time.

    A fault injected at a known point between two whole-second slots makes the slots it
    hits the same in every run (the claims of slot ``s`` go out in ``[s, s + jitter]``).
    """
    time.sleep((fraction - time.time() % 1.0) % 1.0)
    return time.time()


def faketime_command() -> list[str]:
    """The ``faketime`` command (Debian package ``faketime``, installed by
    ``python scripts/servers.py install``); skipped locally and failing in CI without it."""
    found = shutil.which("faketime")
    if found is None:
        missing("the faketime command (python scripts/servers.py install, or apt-get "
                "install faketime)")
        raise AssertionError("unreachable")  # pragma: no cover
    return [found]


__all__ = ["HEARTBEAT", "INSTANCES", "JITTER", "LEASE", "MAX_LATE", "OPTIONS", "begins",
           "duplicates", "faketime_command", "logs", "make_workers", "skips",
           "sleep_until_fraction", "starts_per_slot", "tick"]
