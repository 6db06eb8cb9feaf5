"""Child processes of the repository's code: start them, wait for them, stop them.

Every harness that runs processes (the clusters of :mod:`tests.harness.cluster`, the
Celery and Dramatiq rigs, the benchmarks' members and beats) starts them with
:func:`child_env` (the repository root first on ``PYTHONPATH``, so ``python -m tests...``
and ``python -m benchmarks...`` resolve from any working directory) and stops them with
:func:`terminate` or :func:`stop_all`. :func:`spawn` starts a module that speaks the
``ready`` protocol: it prints ``ready`` on stdout once started and reads commands on
stdin; :func:`wait_ready` and :func:`wait_exit` wait for such processes with deadlines.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, TypeVar

ROOT = Path(__file__).resolve().parents[2]

Proc = TypeVar("Proc", subprocess.Popen[str], subprocess.Popen[bytes])


def child_env(*paths: str | Path, **extra: str) -> dict[str, str]:
    """This process's environment plus ``extra``, with ``PYTHONPATH`` = the repository
    root, then ``paths`` (empty ones left out)."""
    parts = [str(ROOT), *(str(p) for p in paths if str(p))]
    return {**os.environ, **extra, "PYTHONPATH": os.pathsep.join(parts)}


def spawn(module: str, config: dict[str, Any], stderr: Path) -> subprocess.Popen[str]:
    """Start ``python -m MODULE CONFIG_JSON`` with pipes for stdin and stdout (text) and
    stderr appended to ``stderr``."""
    with stderr.open("a") as errors:
        return subprocess.Popen([sys.executable, "-m", module, json.dumps(config)], cwd=ROOT,
                                env=child_env(), stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=errors, text=True)


def wait_ready(procs: list[subprocess.Popen[str]], timeout: float, logs: list[Path]) -> None:
    """Wait until every process printed ``ready``; fail with the logs' tails otherwise."""
    deadline = time.monotonic() + timeout
    pending = {p.stdout.fileno(): p for p in procs if p.stdout is not None}
    while pending:
        left = deadline - time.monotonic()
        if left <= 0:
            raise RuntimeError(f"process(es) not ready after {timeout}s: " + tails(logs))
        readable, _, _ = select.select(list(pending), [], [], min(left, 0.5))
        for fd in readable:
            proc = pending[fd]
            assert proc.stdout is not None
            line = proc.stdout.readline()
            if line.strip() == "ready":
                del pending[fd]
            elif line == "":
                raise RuntimeError(f"process exited with {proc.wait()}: " + tails(logs))


def wait_exit(procs: Sequence[Proc], timeout: float, logs: list[Path]) -> None:
    """Wait for every process to exit 0 within ``timeout``; kill them all and fail
    otherwise."""
    deadline = time.monotonic() + timeout
    for proc in procs:
        try:
            code = proc.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            for other in procs:
                other.kill()
            raise RuntimeError(f"process(es) still running after {timeout}s: "
                               + tails(logs)) from None
        if code != 0:
            raise RuntimeError(f"process exited with {code}: " + tails(logs))


def terminate(procs: Iterable[Proc], timeout: float) -> None:
    """SIGTERM every live process (a graceful stop), then wait up to ``timeout`` for each;
    SIGKILL one that is still running."""
    chosen = list(procs)
    for proc in chosen:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    for proc in chosen:
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def stop_all(procs: Iterable[Proc]) -> None:
    """SIGKILL whatever is still running and reap it (clean-up after a failure)."""
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def tails(logs: Iterable[Path], chars: int = 800) -> str:
    """The last ``chars`` characters of each log that exists, for an error message."""
    return " | ".join(f"{p.name}: {p.read_text(errors='replace')[-chars:]}" for p in logs
                      if p.exists())


__all__ = ["ROOT", "child_env", "spawn", "stop_all", "tails", "terminate", "wait_exit",
           "wait_ready"]
