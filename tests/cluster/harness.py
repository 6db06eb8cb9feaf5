"""Runs worker processes and reads back what they logged."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from anarchon import from_url
from anarchon.backends.base import JobSpec

ROOT = Path(__file__).resolve().parents[2]


class Cluster:
    """Instances of one job sharing a store; each logs to the same JSONL file and offers
    ``handlers`` (names) for dynamic jobs."""

    def __init__(self, url: str, log: Path, job: dict[str, Any],
                 options: dict[str, Any] | None = None, handlers: Sequence[str] = ()) -> None:
        self.url = url
        self.log = log
        self.job = job
        self.options = options or {}
        self.handlers = list(handlers)
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    def spawn(self, instance: str) -> subprocess.Popen[bytes]:
        config = dict(url=self.url, instance=instance, log=str(self.log), job=self.job,
                      options=self.options, handlers=self.handlers)
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        proc = subprocess.Popen([sys.executable, "-m", "tests.cluster.worker",
                                 json.dumps(config)], cwd=ROOT, env=env)
        self.procs[instance] = proc
        return proc

    def start(self, *instances: str) -> None:
        if not self.procs:
            asyncio.run(_register(self.url, self.job))
        for instance in instances:
            self.spawn(instance)
        self.wait_for(lambda lines: all(any(r["kind"] == "ready" and r["instance"] == i
                                            for r in lines) for i in instances), 30,
                      "instances ready")

    def records(self) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        with self.log.open() as handle:
            return [json.loads(line) for line in handle if line.strip()]

    def events(self, type_: str) -> list[dict[str, Any]]:
        return [r for r in self.records() if r["kind"] == "event" and r["type"] == type_]

    def wait_for(self, check: Callable[[list[dict[str, Any]]], Any], timeout: float,
                 what: str) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            result = check(self.records())
            if result:
                return result
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout}s waiting for {what}; "
                                     f"log: {self.records()[-30:]}")
            time.sleep(0.05)

    def signal(self, instance: str, signum: int) -> float:
        self.procs[instance].send_signal(signum)
        return time.time()

    def stop_all(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGCONT)
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


async def _register(url: str, job: dict[str, Any]) -> None:
    """Tell the store about the job before any instance starts, as an earlier deploy
    would: an instance that starts after a one-off slot on a loaded machine then still
    catches it up instead of never running it."""
    backend = from_url(url)
    await backend.open()
    await backend.register([JobSpec(job["name"], job["kind"], str(job["when"]))])
    await backend.close()


def first(kind: str, **match: Any) -> Callable[[list[dict[str, Any]]], dict[str, Any] | None]:
    """A check for ``wait_for``: the first record of ``kind`` whose fields match."""
    def check(lines: list[dict[str, Any]]) -> dict[str, Any] | None:
        for line in lines:
            if line["kind"] == kind and all(line.get(k) == v for k, v in match.items()):
                return line
        return None

    return check
