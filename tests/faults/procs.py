"""Clusters of :mod:`tests.faults.worker` processes and what the issue-15 tests read back.

:class:`Procs` is the scenario harness's :class:`~anarchon.scenarios.harness.Cluster`
(same log, ``wait_for``, signals, ``@go`` jobs) with the fault suite's own worker, which
can block its event loop, run under ``Scheduler.run()``, use a skewed clock, run under a
command prefix (``faketime``) and copies the ``anarchon`` logger into the log.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from anarchon.scenarios.harness import Cluster, Records
from tests.faults.conftest import missing

ROOT = Path(__file__).resolve().parents[2]

#: the timings of issue 15's findings
LEASE, HEARTBEAT, JITTER, MAX_LATE = 2.0, 0.3, 0.2, 60.0
OPTIONS = dict(lease=LEASE, heartbeat=HEARTBEAT, jitter=JITTER)
INSTANCES = ("a", "b", "c")


class Procs(Cluster):
    """A cluster of fault-suite workers; ``spawn(..., wrapper=[...])`` prefixes the command."""

    def spawn(self, instance: str, wrapper: Sequence[str] = (), **extra: Any
              ) -> subprocess.Popen[bytes]:
        config = dict(url=self.url, instance=instance, log=str(self.log), jobs=self.jobs,
                      options=self.options, stop_timeout=self.stop_timeout,
                      go_file=str(self.go_file), **extra)
        path = os.environ.get("PYTHONPATH", "")
        env = {**os.environ, "PYTHONPATH": str(ROOT) + (os.pathsep + path if path else "")}
        output = self.log.with_name(f"{self.log.stem}.{instance}.out").open("ab")
        try:
            # a wrapper (faketime) forks the worker and waits: give it a process group
            # of its own, so that stop_all() reaches the worker too
            proc = subprocess.Popen([*wrapper, sys.executable, "-m", "tests.faults.worker",
                                     json.dumps(config)], cwd=ROOT, env=env,
                                    stdin=subprocess.DEVNULL, stdout=output,
                                    stderr=subprocess.STDOUT, start_new_session=bool(wrapper))
        finally:
            output.close()
        if wrapper:
            self.groups.add(proc.pid)
        self.procs[instance] = proc
        self.note("spawn", instance, pid=proc.pid)
        return proc

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        #: process groups of wrapped instances (their leader's pid)
        self.groups: set[int] = set()

    def stop_all(self, graceful: bool = True) -> None:
        """As :meth:`Cluster.stop_all`, then SIGKILL what is left of wrapped instances."""
        super().stop_all(graceful)
        for group in self.groups:
            try:
                os.killpg(group, signal.SIGKILL)
            except ProcessLookupError:
                pass  # the whole group is gone already

    def output(self, instance: str) -> str:
        """What ``instance`` wrote to stdout/stderr (logging, tracebacks)."""
        path = self.log.with_name(f"{self.log.stem}.{instance}.out")
        return path.read_text(errors="replace") if path.exists() else ""

    def dead(self) -> dict[str, int | None]:
        """Instances that exited, with their return codes."""
        return {name: proc.returncode for name, proc in self.procs.items()
                if proc.poll() is not None}


def make_procs(made: list[Cluster], url: str, tmp_path: Path, jobs: list[dict[str, Any]],
               **options: Any) -> Procs:
    """A :class:`Procs` with the issue's timings (``options`` override them), added to
    ``made`` (the ``clusters`` fixture, which SIGKILLs them at teardown)."""
    cluster = Procs(url, tmp_path / f"log{len(made)}.jsonl", jobs, {**OPTIONS, **options},
                    stop_timeout=5)
    made.append(cluster)
    return cluster


def tick(duration: float = 0.2, **options: Any) -> dict[str, Any]:
    """The issue's job: every 1 s, ``max_late`` 60 s."""
    return dict(kind="every", name="tick", when="1s", duration=duration,
                options=dict(max_late=MAX_LATE, **options))


def begins(records: Records, job: str) -> list[dict[str, Any]]:
    return [r for r in records if r["kind"] == "begin" and r["job"] == job]


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


__all__ = ["HEARTBEAT", "INSTANCES", "JITTER", "LEASE", "MAX_LATE", "OPTIONS", "Procs",
           "begins", "duplicates", "faketime_command", "logs", "make_procs", "skips",
           "sleep_until_fraction", "starts_per_slot", "tick"]
