"""One instance of a fault-suite cluster: ``python -m tests.faults.worker CONFIG_JSON``.

Public API only (``Scheduler``, ``from_url``, the ``Clock`` protocol), so it survives
changes inside the engine. Every line goes to one shared JSONL log opened with
``O_APPEND`` and written with one ``os.write`` per line, so lines of several processes
never interleave. Config keys:

* ``url``, ``instance``, ``log``, ``options`` (scheduler options), ``stop_timeout``;
* ``jobs``: ``{kind, name, when, options, duration, blocking}``; ``blocking`` makes the
  handler an ``async def`` that calls ``time.sleep(duration)`` (it blocks the event loop),
  else a plain handler waits ``duration`` on its abort signal;
* ``clock_offset``: the engine's wall clock is shifted by this (an injected clock);
* ``faked_offset``: seconds the process clock is shifted by from outside (``faketime``);
  subtracted from every logged ``t`` so that all lines are in real time;
* ``start_at``: before starting, wait until the (real) fraction of the second is this;
* ``mode``: ``"start"`` (``start()``, log ``ready``, wait for SIGTERM) or ``"run"``
  (``Scheduler.run()``, which blocks and handles the signals itself);
* ``events``: the event types logged (default all); ``go_file`` as in
  :mod:`anarchon.scenarios.worker` (``when="@go"``).

Records of the ``anarchon`` logger are logged as ``kind="log"`` lines (``level``, ``msg``).
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

from anarchon import Event, RunContext, Scheduler, SystemClock, from_url

ALL_EVENTS = ("start", "success", "failure", "interrupted", "skip", "lost", "error")
Write = Callable[..., None]


class SkewedClock(SystemClock):
    """The system clock with its wall time shifted by ``offset`` seconds."""

    def __init__(self, offset: float) -> None:
        self.offset = offset

    def time(self) -> float:
        return time.time() + self.offset


class LogLines(logging.Handler):
    """Copies the ``anarchon`` logger's records into the shared log."""

    def __init__(self, write: Write) -> None:
        super().__init__(logging.INFO)
        self.write = write

    def emit(self, record: logging.LogRecord) -> None:
        self.write(kind="log", level=record.levelname, msg=record.getMessage(),
                   thread=record.threadName)


def _handler(job: dict[str, Any], write: Write) -> Any:
    duration = float(job.get("duration", 0.0))

    def begin(ctx: RunContext) -> None:
        write(kind="begin", job=ctx.name, slot=ctx.slot, attempt=ctx.attempt,
              reason=ctx.reason)

    if job.get("blocking"):
        async def blocking(ctx: RunContext) -> None:
            begin(ctx)
            time.sleep(duration)  # noqa: ASYNC251 - the fault: it blocks the event loop
            write(kind="end", job=ctx.name, slot=ctx.slot, attempt=ctx.attempt,
                  aborted=ctx.signal.aborted, signal=ctx.signal.reason)

        return blocking

    def plain(ctx: RunContext) -> None:
        begin(ctx)
        aborted = ctx.signal.wait(duration)
        write(kind="end", job=ctx.name, slot=ctx.slot, attempt=ctx.attempt, aborted=aborted,
              signal=ctx.signal.reason)
        if aborted:
            ctx.signal.raise_if_aborted()

    return plain


def _resolve_go(jobs: list[dict[str, Any]], go_file: str | None, write: Write) -> None:
    if not any(job["when"] == "@go" for job in jobs):
        return
    write(kind="loaded")
    go = Path(str(go_file))
    deadline = time.monotonic() + 120
    while not go.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"no go file {go} after 120 s")
        _pause(0.02)
    times = json.loads(go.read_text())
    for job in jobs:
        if job["when"] == "@go":
            job["when"] = times[job["name"]]


def _pause(seconds: float) -> None:
    """``time.sleep`` that works under ``faketime`` with ``FAKETIME_DONT_FAKE_MONOTONIC``
    (where its ``clock_nanosleep`` fails with EINVAL)."""
    threading.Event().wait(seconds)


def _wait_for_fraction(fraction: float, faked_offset: float) -> None:
    """Sleep until the real wall clock's fraction of a second is ``fraction``."""
    now = time.time() - faked_offset
    _pause((fraction - now % 1.0) % 1.0)


def main(argv: list[str] | None = None) -> int:
    """Run one instance; returns the exit status (1 if the scheduler raised)."""
    config: dict[str, Any] = json.loads((argv or sys.argv[1:])[0])
    fd = os.open(config["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    instance = str(config["instance"])
    faked = float(config.get("faked_offset", 0.0))

    def write(**fields: Any) -> None:
        fields.update(t=time.time() - faked, instance=instance, pid=os.getpid())
        os.write(fd, (json.dumps(fields) + "\n").encode())

    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    logging.getLogger("anarchon").addHandler(LogLines(write))
    jobs = [dict(job) for job in config["jobs"]]
    _resolve_go(jobs, config.get("go_file"), write)
    offset = float(config.get("clock_offset", 0.0))
    scheduler = Scheduler(from_url(config["url"]), instance_id=instance,
                          clock=SkewedClock(offset) if offset else None,
                          **config.get("options", {}))
    for job in jobs:
        getattr(scheduler, job["kind"])(job["name"], job["when"], _handler(job, write),
                                        **job.get("options", {}))

    def on_event(event: Event) -> None:
        write(kind="event", type=event.type, job=event.name, slot=event.slot,
              attempt=event.attempt, reason=event.reason,
              error=repr(event.error) if event.error else None)

    for kind in config.get("events", ALL_EVENTS):
        scheduler.on(kind, on_event)
    if config.get("start_at") is not None:
        _wait_for_fraction(float(config["start_at"]), faked)
    stop_timeout = float(config.get("stop_timeout", 5))
    try:
        if config.get("mode", "start") == "run":
            write(kind="running")
            scheduler.run(stop_timeout=stop_timeout)
        else:
            _start_and_wait(scheduler, stop_timeout, write)
    except BaseException as exc:
        write(kind="exit", error=repr(exc))
        raise
    write(kind="exit", error=None)
    return 0


def _start_and_wait(scheduler: Scheduler, stop_timeout: float, write: Write) -> None:
    stop_requested = threading.Event()

    def request_stop(signum: int, frame: FrameType | None) -> None:
        write(kind="signal", signal=signal.Signals(signum).name)
        stop_requested.set()

    signal.signal(signal.SIGINT, request_stop)
    signal.signal(signal.SIGTERM, request_stop)
    try:
        scheduler.start()
        write(kind="ready")
        while not stop_requested.wait(0.2):
            pass
    finally:
        scheduler.stop(stop_timeout)


if __name__ == "__main__":
    sys.exit(main())
