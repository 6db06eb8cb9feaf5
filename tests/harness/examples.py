"""Running example files as real subprocesses against the rig's servers."""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from tests.stores import StoreSpec, all_stores, in_ci

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
STORES = {spec.id: spec for spec in all_stores()}


def require(store: str) -> StoreSpec:
    """The store's spec; skip (fail in CI) when its server does not answer."""
    spec = STORES[store]
    reason = spec.unavailable()
    if reason is not None:
        message = f"{store} server not available: {reason} (start it with scripts/servers.py)"
        if in_ci():
            pytest.fail(f"CI needs every server: {message}", pytrace=False)
        pytest.skip(message)
    return spec


def store_url(store: str) -> str:
    """A backend URL on ``store`` in a namespace no other test uses."""
    return require(store).url_for("e2e_" + uuid.uuid4().hex[:10])


def example_env(**extra: str) -> dict[str, str]:
    """The environment for an example: the repository importable, output unbuffered."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
    env.pop("ANARCHON_BACKEND", None)  # every test says which store it uses
    env.update(extra)
    return env


class Example:
    """One example process; its output (stdout and stderr) is collected line by line."""

    def __init__(self, script: str, *args: str, env: dict[str, str] | None = None,
                 new_session: bool = False) -> None:
        self.script = script
        self.proc = subprocess.Popen(
            [sys.executable, str(EXAMPLES / script), *args], cwd=ROOT,
            env=env or example_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True, start_new_session=new_session,
        )
        self.lines: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        self._cursor = 0
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._queue.put(line.rstrip("\n"))
        self._queue.put(None)

    def _drain(self, timeout: float) -> bool:
        """Move queued lines to :attr:`lines`; False once the output has ended."""
        try:
            line = self._queue.get(timeout=timeout)
        except queue.Empty:
            return True
        if line is None:
            self._queue.put(None)
            return False
        self.lines.append(line)
        return True

    @property
    def output(self) -> str:
        while not self._queue.empty():
            if not self._drain(0):
                break
        return "\n".join(self.lines)

    def has(self, pattern: str) -> bool:
        """True if any line so far matches ``pattern`` (does not move the cursor)."""
        return any(re.search(pattern, line) for line in self.output.splitlines())

    def wait_for(self, pattern: str, timeout: float) -> re.Match[str]:
        """The first line (after earlier matches) matching ``pattern``, within ``timeout``."""
        deadline = time.monotonic() + timeout
        while True:
            while self._cursor < len(self.lines):
                match = re.search(pattern, self.lines[self._cursor])
                self._cursor += 1
                if match:
                    return match
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not self._drain(min(remaining, 0.2)):
                if self._cursor < len(self.lines):
                    continue
                raise AssertionError(f"{self.script}: no line matched {pattern!r} within "
                                     f"{timeout}s; output:\n{self.output}")

    def signal(self, signum: int) -> None:
        self.proc.send_signal(signum)

    def interrupt_group(self) -> None:
        """SIGINT to the example and its children, as Ctrl+C in a terminal does (needs
        ``new_session=True``: the group is the example's own)."""
        os.killpg(self.proc.pid, signal.SIGINT)

    def finish(self, timeout: float, expect_code: int | None = 0) -> str:
        """Wait for the process to exit; returns its whole output."""
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"{self.script} did not exit within {timeout}s; output:\n"
                                 f"{self.output}") from None
        while self._drain(5):
            pass
        if expect_code is not None:
            assert code == expect_code, (f"{self.script} exited with {code}; output:\n"
                                         f"{self.output}")
        return self.output

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.kill()
            self.proc.wait()


def run_example(script: str, *args: str, timeout: float = 60,
                env: dict[str, str] | None = None) -> str:
    """Run an example to completion; returns its output (asserts exit code 0)."""
    example = Example(script, *args, env=env)
    try:
        return example.finish(timeout)
    finally:
        example.kill()
