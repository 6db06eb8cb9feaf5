"""Starting member processes and waiting for them with deadlines."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def spawn(config: dict[str, Any], stderr: Path) -> subprocess.Popen[str]:
    """Start ``python -m benchmarks.member CONFIG`` with pipes for stdin and stdout."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-m", "benchmarks.member", json.dumps(config)],
                            cwd=ROOT, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=stderr.open("a"), text=True)


def wait_ready(procs: list[subprocess.Popen[str]], timeout: float, logs: list[Path]) -> None:
    """Wait until every process printed ``ready``; fail with its stderr otherwise."""
    deadline = time.monotonic() + timeout
    pending = {p.stdout.fileno(): p for p in procs if p.stdout is not None}
    while pending:
        left = deadline - time.monotonic()
        if left <= 0:
            raise RuntimeError(f"member(s) not ready after {timeout}s: " + _tails(logs))
        readable, _, _ = select.select(list(pending), [], [], min(left, 0.5))
        for fd in readable:
            proc = pending[fd]
            assert proc.stdout is not None
            line = proc.stdout.readline()
            if line.strip() == "ready":
                del pending[fd]
            elif line == "":
                raise RuntimeError(f"member exited with {proc.wait()}: " + _tails(logs))


def wait_exit(procs: list[subprocess.Popen[str]], timeout: float, logs: list[Path]) -> None:
    """Wait for every process to exit 0 within ``timeout``; kill and fail otherwise."""
    deadline = time.monotonic() + timeout
    for proc in procs:
        try:
            code = proc.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            for other in procs:
                other.kill()
            raise RuntimeError(f"member(s) still running after {timeout}s: "
                               + _tails(logs)) from None
        if code != 0:
            raise RuntimeError(f"member exited with {code}: " + _tails(logs))


def stop_all(procs: list[subprocess.Popen[str]]) -> None:
    """Kill whatever is still running (cleanup after a failure)."""
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _tails(logs: list[Path]) -> str:
    return " | ".join(f"{p.name}: {p.read_text(errors='replace')[-800:]}" for p in logs
                      if p.exists())
