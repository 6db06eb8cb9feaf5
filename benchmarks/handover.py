"""Hand-over and takeover delays with real processes.

Three instance processes (``tests.harness.worker``, the test clusters' instance) share
one long run (its handler waits for the abort signal and then raises). Each trial
signals the current runner and measures, on the wall clock, the time from the signal to
the backup's handler start (next attempt):

* ``graceful``: SIGTERM → ``stop()`` hands the run over; backups notice at their next
  heartbeat (the engine has no store notification channel yet);
* ``kill``: SIGKILL → a backup takes over once the lease expired.

The signalled instance is replaced by a new process before the next trial.
"""

from __future__ import annotations

import asyncio
import signal
import time
import uuid
from pathlib import Path
from typing import Any

from anarchon.backends.base import JobSpec
from tests.harness.cleanup import cleanup
from tests.harness.cluster import Records, WorkerCluster, register
from tests.harness.rig import backend_url

from .common import summary_ms

JOB = "handover"


class Trials:
    """A cluster of instance processes (:mod:`tests.harness.worker`) sharing one run."""

    def __init__(self, url: str, workdir: Path, namespace: str, lease: float,
                 heartbeat: float, trials: int) -> None:
        hour = 3_600_000
        offset = (int(time.time() * 1000) + 3000) % hour
        job = {"kind": "every", "name": JOB, "when": "1h", "duration": 3600.0,
               "options": {"offset": offset / 1000, "jitter": 0,
                           "max_attempts": 2 * trials + 5}}
        self.cluster = WorkerCluster(url, workdir / f"{namespace}.jsonl", [job],
                                     {"lease": lease, "heartbeat": heartbeat},
                                     stop_timeout=10, events=[])
        self.count = 0

    def add(self, n: int) -> None:
        names = [f"m{self.count + i}" for i in range(1, n + 1)]
        self.count += n
        self.cluster.start(*names, timeout=60)

    def begins(self, lines: Records | None = None) -> Records:
        return [r for r in (self.cluster.records() if lines is None else lines)
                if r["kind"] == "begin"]

    def wait_begin(self, after_attempt: int, timeout: float) -> dict[str, Any]:
        found = self.cluster.wait_for(
            lambda lines: [b for b in self.begins(lines) if b["attempt"] > after_attempt],
            timeout, f"an attempt > {after_attempt}")
        return min(found, key=lambda b: int(b["attempt"]))

    def trial(self, kind: str, timeout: float) -> float:
        current = max(self.begins(), key=lambda b: int(b["attempt"]))
        runner = current["instance"]
        sent = time.time()
        self.cluster.signal(runner, signal.SIGTERM if kind == "graceful" else signal.SIGKILL)
        begin = self.wait_begin(int(current["attempt"]), timeout)
        delay = float(begin["t"]) - sent
        self.cluster.wait_exit(runner, 30)
        self.add(1)
        return delay

    def close(self) -> None:
        self.cluster.stop_all()


def measure(store: str, base: str | None, workdir: Path, lease: float, heartbeat: float,
            trials: dict[str, int]) -> list[dict[str, Any]]:
    """Rows for each kind in ``trials`` (kind -> number of trials)."""
    namespace = f"ho{uuid.uuid4().hex[:8]}"
    url = backend_url(store, base, namespace, workdir)
    cluster = Trials(url, workdir, namespace, lease, heartbeat, sum(trials.values()))
    rows = []
    try:
        # known to the store before its slot, as after an earlier deploy: members that
        # start after the slot on a loaded machine then catch it up
        register(url, [JobSpec(JOB, "every", "every 1h")])
        cluster.add(3)
        cluster.wait_begin(0, 30)
        for kind, count in trials.items():
            delays = [cluster.trial(kind, lease * 3 + 30) for _ in range(count)]
            rows.append({"backend": store, "kind": kind, "lease": lease,
                         "heartbeat": heartbeat, "trials": count, **summary_ms(delays),
                         "bound_ms": round(1000 * (2 * heartbeat if kind == "graceful"
                                                   else lease + 2 * heartbeat), 1)})
    finally:
        cluster.close()
        asyncio.run(cleanup(store, base, namespace, [JOB]))
    return rows
