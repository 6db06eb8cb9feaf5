"""Runs instance processes and reads back what they (and the harness) logged.

Every instance appends JSON lines to one log file (see `.worker`); the harness
appends a ``fault`` line for each signal it sends and a ``spawn`` line for each process it
starts, so a measurement can be computed from the log alone.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

#: the directory holding the ``anarchon`` package, for the children's ``PYTHONPATH``
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])

Records = list[dict[str, Any]]


class Cluster:
    """Instances sharing one store; each runs the same jobs and logs to ``log``.

    Each instance's own output (warnings, tracebacks) goes to ``<log stem>.<instance>.out``
    beside the log.
    """

    def __init__(self, url: str, log: Path, jobs: Sequence[dict[str, Any]],
                 options: dict[str, Any] | None = None, stop_timeout: float = 5.0) -> None:
        self.url = url
        self.log = log
        self.jobs = list(jobs)
        self.options = dict(options or {})
        self.stop_timeout = stop_timeout
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.frozen: set[str] = set()
        #: where one-off jobs (``when="@go"``) read their time; see `start_deferred()`
        self.go_file = log.with_name(log.stem + ".go.json")

    # -- processes ---------------------------------------------------------------------

    def spawn(self, instance: str, **extra: Any) -> subprocess.Popen[bytes]:
        """Start one instance (``extra`` config keys such as ``clock_offset``)."""
        config = dict(url=self.url, instance=instance, log=str(self.log), jobs=self.jobs,
                      options=self.options, stop_timeout=self.stop_timeout,
                      go_file=str(self.go_file), **extra)
        path = os.environ.get("PYTHONPATH", "")
        env = {**os.environ,
               "PYTHONPATH": _PACKAGE_ROOT + (os.pathsep + path if path else "")}
        output = self.log.with_name(f"{self.log.stem}.{instance}.out").open("ab")
        try:
            proc = subprocess.Popen([sys.executable, "-m", "anarchon_lab.scenarios.worker",
                                     json.dumps(config)], env=env, stdin=subprocess.DEVNULL,
                                    stdout=output, stderr=subprocess.STDOUT)
        finally:
            output.close()
        self.procs[instance] = proc
        self.note("spawn", instance, pid=proc.pid)
        return proc

    def start(self, *instances: str, timeout: float = 30, **extra: Any) -> float:
        """Spawn ``instances`` and wait until each has logged ``ready``; returns the time."""
        since = time.time()
        for instance in instances:
            self.spawn(instance, **extra)
        self.wait_for(lambda lines: all(
            any(r["kind"] == "ready" and r["instance"] == i and r["t"] >= since for r in lines)
            for i in instances), timeout, f"instances {', '.join(instances)} ready")
        return time.time()

    def start_deferred(self, *instances: str, lead: float = 1.5, timeout: float = 30,
                       **extra: Any) -> int:
        """Spawn ``instances``, wait until all have loaded, then set every ``"@go"`` job's
        time to a whole second at least ``lead`` seconds away (the same for all, and for
        instances spawned later); waits until all are ready and returns that time."""
        since = time.time()
        for instance in instances:
            self.spawn(instance, **extra)
        self.wait_for(lambda lines: all(
            any(r["kind"] == "loaded" and r["instance"] == i and r["t"] >= since for r in lines)
            for i in instances), timeout, f"instances {', '.join(instances)} loaded")
        when = int(time.time() + lead) + 1
        names = [job["name"] for job in self.jobs if job["when"] == "@go"]
        partial = self.go_file.with_suffix(".tmp")
        partial.write_text(json.dumps({name: when for name in names}))
        os.replace(partial, self.go_file)
        self.wait_for(lambda lines: all(
            any(r["kind"] == "ready" and r["instance"] == i and r["t"] >= since for r in lines)
            for i in instances), timeout, f"instances {', '.join(instances)} ready")
        return when

    def alive(self, instance: str) -> bool:
        proc = self.procs.get(instance)
        return proc is not None and proc.poll() is None

    def live_pids(self) -> set[int]:
        """Pids of instances that are running and not frozen."""
        return {proc.pid for name, proc in self.procs.items()
                if proc.poll() is None and name not in self.frozen}

    def signal(self, instance: str, signum: int) -> float:
        """Send ``signum`` to ``instance``, log it as a fault and return the time."""
        proc = self.procs[instance]
        if signum == signal.SIGSTOP:
            self.frozen.add(instance)
        elif signum == signal.SIGCONT:
            self.frozen.discard(instance)
        proc.send_signal(signum)
        return self.note("fault", instance, signal=signal.Signals(signum).name, pid=proc.pid)

    def kill(self, instance: str) -> float:
        """SIGKILL ``instance`` and reap it."""
        sent = self.signal(instance, signal.SIGKILL)
        self.procs[instance].wait()
        return sent

    def wait_exit(self, instance: str, timeout: float = 15) -> None:
        try:
            self.procs[instance].wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill(instance)

    def stop_all(self, graceful: bool = True) -> None:
        """Stop every instance (SIGTERM, or SIGKILL when not ``graceful``)."""
        for instance, proc in self.procs.items():
            if proc.poll() is None:
                proc.send_signal(signal.SIGCONT)
                self.frozen.discard(instance)
                proc.send_signal(signal.SIGTERM if graceful else signal.SIGKILL)
        for instance in self.procs:
            self.wait_exit(instance)

    # -- the log -------------------------------------------------------------------------

    def note(self, kind: str, instance: str, **fields: Any) -> float:
        """Append a harness line to the log; returns its time."""
        now = time.time()
        with self.log.open("a") as handle:
            handle.write(json.dumps(dict(kind=kind, instance=instance, t=now, **fields)) + "\n")
        return now

    def records(self) -> Records:
        if not self.log.exists():
            return []
        with self.log.open() as handle:
            lines = []
            for line in handle:
                try:
                    lines.append(json.loads(line))
                except ValueError:
                    continue  # a line being written right now
            return lines

    def wait_for(self, check: Callable[[Records], Any], timeout: float, what: str,
                 required: bool = True) -> Any:
        """Poll the log until ``check`` returns something truthy; ``None`` on timeout
        unless ``required`` (then ``TimeoutError`` naming ``what``)."""
        deadline = time.monotonic() + timeout
        while True:
            result = check(self.records())
            if result:
                return result
            if time.monotonic() > deadline:
                if required:
                    tail = [{k: v for k, v in r.items() if k != "pid"}
                            for r in self.records()[-12:]]
                    raise TimeoutError(f"timed out after {timeout:g}s waiting for {what}; "
                                       f"last log lines: {tail}")
                return None
            time.sleep(0.05)


def first(kind: str, **match: Any) -> Callable[[Records], dict[str, Any] | None]:
    """A check for ``Cluster.wait_for()``: the first
    record of ``kind`` matching."""
    def check(lines: Records) -> dict[str, Any] | None:
        for line in lines:
            if line["kind"] == kind and all(line.get(k) == v for k, v in match.items()):
                return line
        return None

    return check


__all__ = ["Cluster", "Records", "first"]
