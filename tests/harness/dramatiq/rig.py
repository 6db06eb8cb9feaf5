"""Scheduler (the real ``anarchon-dramatiq`` CLI) and worker processes for one test."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from anarchon.backends.base import JobSpec
from tests.harness.cluster import register
from tests.harness.procs import ROOT, child_env, terminate

LEASE, HEARTBEAT = 2.0, 0.3
#: the job each one-off scenario of ``app.py`` declares
AT_JOBS = {"fail": "failing", "hang": "once", "pause": "once", "crash": "slow"}


def preregister(store: str, name: str, when: float) -> None:
    """Make the store know job ``name`` now, before its slot.

    A scheduler that starts after the slot (a slow start on a loaded machine) then
    catches the slot up instead of never seeing it: the test stays about the cluster,
    not about process start-up times.
    """
    register(store, [JobSpec(name, "at", f"at {when}")])


class Rig:
    """Processes of one test sharing a broker namespace, a store and a JSONL log."""

    def __init__(self, tmp: Path, broker: str, namespace: str, store: str, scenario: str,
                 at_lead: float | None = None, *, middleware: bool = True,
                 queue_lease: float | None = None) -> None:
        self.tmp = tmp
        self.log = tmp / "log.jsonl"
        self.store = store
        self.scenario = scenario
        self.env = child_env(ADT_BROKER=broker, ADT_NAMESPACE=namespace, ADT_STORE=store,
                             ADT_LOG=str(self.log), ADT_SCENARIO=scenario,
                             ADT_LEASE=str(LEASE), ADT_HEARTBEAT=str(HEARTBEAT),
                             ADT_MIDDLEWARE="1" if middleware else "0")
        self.queue_lease = queue_lease
        #: ``at`` scenarios: the one-off slot lies this far after the schedulers start
        self.at_lead = at_lead
        self.env["ADT_AT"] = "0"  # workers only need the actor declared
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    def _spawn(self, name: str, args: list[str], role: str) -> subprocess.Popen[bytes]:
        out = (self.tmp / f"{name}.out").open("wb")
        proc = subprocess.Popen([sys.executable, *args], cwd=ROOT, stdout=out,
                                stderr=subprocess.STDOUT, env={**self.env, "ADT_ROLE": role})
        out.close()
        self.procs[name] = proc
        return proc

    def output(self, name: str) -> str:
        return (self.tmp / f"{name}.out").read_text(errors="replace")

    def schedulers(self, *names: str, extra: dict[str, list[str]] | None = None) -> None:
        """Start ``anarchon-dramatiq`` instances and wait until each is scheduling
        (``extra``: more command-line arguments of an instance, by name)."""
        if self.at_lead is not None:  # a whole second, the same for every instance
            when = float(int(time.time() + self.at_lead) + 1)
            self.env["ADT_AT"] = str(when)
            preregister(self.store, AT_JOBS[self.scenario], when)
        for name in names:
            self._spawn(name, ["-m", "anarchon_dramatiq", "tests.harness.dramatiq.app",
                               "--backend", self.store, "--lease", str(LEASE),
                               "--heartbeat", str(HEARTBEAT), "--jitter", "0.1",
                               "--instance-id", name, "--stop-timeout", "5",
                               *(["--queue-lease", str(self.queue_lease)]
                                 if self.queue_lease is not None else []),
                               *(extra or {}).get(name, [])], "scheduler")
        self.wait_for(lambda _: all("started with" in self.output(n) for n in names), 30,
                      "schedulers started")

    def workers(self, *names: str) -> None:
        for name in names:
            self._spawn(name, ["-m", "tests.harness.dramatiq.worker_proc"], "worker")
        pids = {self.procs[n].pid for n in names}
        self.wait_for(lambda lines: pids <= {r["pid"] for r in lines if r["kind"] == "ready"},
                      30, "workers ready")

    def name_of(self, pid: int) -> str:
        return next(name for name, proc in self.procs.items() if proc.pid == pid)

    def records(self, kind: str | None = None) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        with self.log.open() as handle:
            lines = [json.loads(line) for line in handle if line.strip()]
        return [r for r in lines if kind is None or r["kind"] == kind]

    def wait_for(self, check: Callable[[list[dict[str, Any]]], Any], timeout: float,
                 what: str) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            for proc_name, proc in self.procs.items():
                code = proc.poll()
                if code not in (None, 0, -signal.SIGKILL, -signal.SIGTERM):
                    raise AssertionError(f"{proc_name} exited with {code}:\n"
                                         f"{self.output(proc_name)[-3000:]}")
            result = check(self.records())
            if result:
                return result
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout}s waiting for {what}; "
                                     f"log tail: {self.records()[-20:]}")
            time.sleep(0.05)

    def kill(self, name: str) -> float:
        self.procs[name].kill()
        self.procs[name].wait()
        return time.time()

    def stop(self, *names: str) -> None:
        """SIGTERM (graceful) and wait; all processes when no name is given."""
        terminate([self.procs[n] for n in names] if names else self.procs.values(), 20)


def first(kind: str, **match: Any) -> Callable[[list[dict[str, Any]]], dict[str, Any] | None]:
    """A ``wait_for`` check: the first record of ``kind`` whose fields match."""
    def check(lines: list[dict[str, Any]]) -> dict[str, Any] | None:
        return next((r for r in lines if r["kind"] == kind
                     and all(r.get(k) == v for k, v in match.items())), None)

    return check
