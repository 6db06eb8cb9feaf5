"""Hand-over and takeover delays with real processes.

Three member processes share one long run (its handler waits for the abort signal and
then raises). Each trial signals the current runner and measures, on the wall clock,
the time from the signal to the backup's handler start (next attempt):

* ``graceful``: SIGTERM → ``stop()`` hands the run over; backups notice at their next
  heartbeat (the engine has no store notification channel yet);
* ``kill``: SIGKILL → a backup takes over once the lease expired.

The signalled member is replaced by a new process before the next trial.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

from anarchon import from_url
from anarchon.backends.base import JobSpec

from .cleanup import cleanup
from .common import summary_ms
from .procs import spawn, stop_all, wait_ready
from .servers import backend_url

JOB = "handover"


class Trials:
    """A cluster of member processes and the JSONL log they share."""

    def __init__(self, url: str, workdir: Path, namespace: str, lease: float,
                 heartbeat: float, trials: int) -> None:
        self.workdir = workdir
        self.namespace = namespace
        self.log = workdir / f"{namespace}.jsonl"
        self.err = workdir / f"{namespace}.err"
        hour = 3_600_000
        offset = (int(time.time() * 1000) + 3000) % hour
        self.config: dict[str, Any] = {
            "mode": "handover", "url": url, "log": str(self.log), "job": JOB, "when": "1h",
            "options": {"lease": lease, "heartbeat": heartbeat},
            "job_options": {"offset": offset / 1000, "jitter": 0,
                            "max_attempts": 2 * trials + 5},
        }
        self.procs: dict[str, subprocess.Popen[str]] = {}
        self.count = 0

    def add(self, n: int) -> None:
        new = []
        for _ in range(n):
            self.count += 1
            name = f"m{self.count}"
            self.procs[name] = spawn({**self.config, "instance": name}, self.err)
            new.append(self.procs[name])
        wait_ready(new, 60, [self.err])

    def begins(self) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        with self.log.open() as handle:
            lines = [json.loads(line) for line in handle if line.strip()]
        return [r for r in lines if r["kind"] == "begin"]

    def wait_begin(self, after_attempt: int, timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            found = [b for b in self.begins() if b["attempt"] > after_attempt]
            if found:
                return min(found, key=lambda b: int(b["attempt"]))
            if time.monotonic() > deadline:
                raise RuntimeError(f"no attempt > {after_attempt} within {timeout}s; log "
                                   f"{self.begins()[-5:]}; {self.err.read_text()[-1500:]}")
            time.sleep(0.01)

    def trial(self, kind: str, timeout: float) -> float:
        current = max(self.begins(), key=lambda b: int(b["attempt"]))
        runner = self.procs.pop(current["instance"])
        sent = time.time()
        runner.send_signal(signal.SIGTERM if kind == "graceful" else signal.SIGKILL)
        begin = self.wait_begin(int(current["attempt"]), timeout)
        delay = float(begin["t"]) - sent
        runner.wait(30)
        self.add(1)
        return delay

    def close(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
        stop_all(list(self.procs.values()))


async def _register(url: str) -> None:
    backend = from_url(url)
    await backend.open()
    await backend.register([JobSpec(JOB, "every", "every 1h")])
    await backend.close()


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
        asyncio.run(_register(url))
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
