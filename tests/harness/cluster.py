"""Clusters of instance processes on one store, all logging to one JSONL file.

The base is the lab's scenario harness, :class:`~anarchon_lab.scenarios.harness.Cluster`
(re-exported here as :class:`Cluster`, with :data:`Records` and :func:`first`): spawning,
the shared log and ``wait_for``, signals logged as ``fault`` lines, ``@go`` one-off jobs,
stopping. Plain, it runs the lab's scenario worker (what ``anarchon scenarios`` runs), so
a fault test drives the very instances the scenarios measure. The lab is a distribution
of its own and cannot import ``tests``: the shared runner lives there, and the test
harness builds on it.

* :class:`WorkerCluster` runs :mod:`tests.harness.worker` instead (blocking handlers,
  ``Scheduler.run()``, a skewed clock, a command prefix such as ``faketime``, dynamic-job
  handlers, the ``anarchon`` logger copied into the log): the fault suite and the
  hand-over benchmark;
* :class:`JobCluster` is a :class:`WorkerCluster` of one job whose instances run under
  ``Scheduler.run()``, with the job registered in the store before the first instance
  starts: the cluster tests.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from anarchon_lab.scenarios.harness import Cluster, Records, first

from anarchon import from_url
from anarchon.backends.base import JobSpec
from tests.harness.procs import ROOT, child_env

#: what every instance of a :class:`JobCluster` logs (``change``: runtime control)
JOB_EVENTS = ("start", "success", "failure", "interrupted", "skip", "lost", "error", "change")


def register(url: str, specs: Sequence[JobSpec]) -> None:
    """Tell the store at ``url`` about jobs before any instance starts, as an earlier
    deploy would: an instance that starts after a slot on a loaded machine then catches it
    up instead of never seeing it."""
    async def run() -> None:
        backend = from_url(url)
        await backend.open()
        try:
            await backend.register(list(specs))
        finally:
            await backend.close()

    asyncio.run(run())


class WorkerCluster(Cluster):
    """A cluster of :mod:`tests.harness.worker` processes; ``spawn(..., wrapper=[...])``
    prefixes the command. ``extra``: config keys every instance gets (see the worker)."""

    def __init__(self, url: str, log: Path, jobs: Sequence[dict[str, Any]],
                 options: dict[str, Any] | None = None, stop_timeout: float = 5.0,
                 **extra: Any) -> None:
        super().__init__(url, log, jobs, options, stop_timeout)
        self.extra = extra
        #: process groups of wrapped instances (their leader's pid)
        self.groups: set[int] = set()

    def spawn(self, instance: str, wrapper: Sequence[str] = (), **extra: Any
              ) -> subprocess.Popen[bytes]:
        config = dict(url=self.url, instance=instance, log=str(self.log), jobs=self.jobs,
                      options=self.options, stop_timeout=self.stop_timeout,
                      go_file=str(self.go_file), **{**self.extra, **extra})
        env = child_env(os.environ.get("PYTHONPATH", ""))
        output = self.log.with_name(f"{self.log.stem}.{instance}.out").open("ab")
        try:
            # a wrapper (faketime) forks the worker and waits: give it a process group
            # of its own, so that stop_all() reaches the worker too
            proc = subprocess.Popen([*wrapper, sys.executable, "-m", "tests.harness.worker",
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

    def events(self, type_: str) -> Records:
        """The ``event`` lines of ``type_`` so far."""
        return [r for r in self.records() if r["kind"] == "event" and r["type"] == type_]


class JobCluster(WorkerCluster):
    """Instances of one ``job`` (``{kind, name, when, options, duration}``) under
    ``Scheduler.run()``, each offering ``handlers`` (names) for dynamic jobs and logging
    every event (``change`` included). The job is registered before the first start."""

    def __init__(self, url: str, log: Path, job: dict[str, Any],
                 options: dict[str, Any] | None = None, handlers: Sequence[str] = ()) -> None:
        super().__init__(url, log, [job], options, mode="run", handlers=list(handlers),
                         events=JOB_EVENTS)

    def start(self, *instances: str, timeout: float = 30, **extra: Any) -> float:
        if not self.procs:
            register(self.url, [JobSpec(job["name"], job["kind"], str(job["when"]))
                                for job in self.jobs])
        return super().start(*instances, timeout=timeout, **extra)


__all__ = ["JOB_EVENTS", "Cluster", "JobCluster", "Records", "WorkerCluster", "first",
           "register"]
