"""One instance of a scenario cluster: ``python -m anarchon_lab.scenarios.worker CONFIG_JSON``.

Config keys:

* ``url``: backend URL (see
[`anarchon_lab.scenarios.stores.build_backend()`][anarchon_lab.scenarios.stores.build_backend]);
* ``instance``: the instance id; ``log``: the JSONL file every line is appended to;
* ``options``: scheduler options (``lease``, ``heartbeat``, ``jitter`` …);
* ``jobs``: a list of ``{kind, name, when, options, duration, raise_on_abort}``;
* ``clock_offset``: seconds this instance's wall clock is shifted by (clock skew);
* ``stop_timeout``: seconds a graceful stop waits for running handlers;
* ``go_file``: a job whose ``when`` is ``"@go"`` takes its time from this JSON file
  (``{job name: epoch seconds}``); the instance logs ``loaded`` and waits for the file
  before it starts, so a one-off slot can be set once every instance is up.

The handler logs ``begin`` and ``end`` lines, every scheduler event is logged as an
``event`` line, and ``ready`` is logged once ``start()`` has returned. SIGINT/SIGTERM stop
the scheduler gracefully (as ``Scheduler.run()`` does) and ``exit`` is logged last.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType
from typing import Any

from anarchon import Event, RunContext, Scheduler
from anarchon.clock import OffsetClock

from .stores import build_backend

EVENTS = ("start", "success", "failure", "interrupted", "skip", "lost", "error")
#: writes one log line (``kind=...`` and the line's fields)
Write = Callable[..., None]


def _handler(job: dict[str, Any], write: Write) -> Callable[[RunContext], None]:
    duration = float(job.get("duration", 0.0))
    raise_on_abort = bool(job.get("raise_on_abort", True))

    def handler(ctx: RunContext) -> None:
        write(kind="begin", job=ctx.name, slot=ctx.slot, attempt=ctx.attempt, reason=ctx.reason)
        aborted = ctx.signal.wait(duration)
        write(kind="end", job=ctx.name, slot=ctx.slot, attempt=ctx.attempt, aborted=aborted,
              signal=ctx.signal.reason)
        if aborted and raise_on_abort:
            ctx.signal.raise_if_aborted()

    return handler


def resolve_go(jobs: list[dict[str, Any]], go_file: str | None, write: Write,
               pause: Callable[[float], None] = time.sleep) -> None:
    """Give every ``"@go"`` job its time from ``go_file``: log ``loaded``, wait (``pause``
    between looks) until the file is there and read it. Nothing without such a job."""
    if not any(job["when"] == "@go" for job in jobs):
        return
    go = Path(str(go_file))
    write(kind="loaded")
    deadline = time.monotonic() + 120
    while not go.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"no go file {go} after 120 s")
        pause(0.02)
    times = json.loads(go.read_text())
    for job in jobs:
        if job["when"] == "@go":
            job["when"] = times[job["name"]]


def log_events(scheduler: Scheduler, write: Write, kinds: Sequence[str] = EVENTS) -> None:
    """Log every scheduler event of ``kinds`` as an ``event`` line."""
    def on_event(event: Event) -> None:
        write(kind="event", type=event.type, job=event.name, slot=event.slot,
              attempt=event.attempt, reason=event.reason,
              error=repr(event.error) if event.error else None)

    for kind in kinds:
        scheduler.on(kind, on_event)  # type: ignore[arg-type]


def serve(scheduler: Scheduler, stop_timeout: float, write: Write) -> None:
    """``start()``, log ``ready``, and run until SIGINT/SIGTERM (each logged as a
    ``signal`` line); then stop gracefully, as ``Scheduler.run()`` does."""
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


def main(argv: list[str] | None = None) -> int:
    """Run one instance until SIGINT/SIGTERM; returns the exit status."""
    config: dict[str, Any] = json.loads((argv or sys.argv[1:])[0])
    lock = threading.Lock()
    log_file = open(config["log"], "a", buffering=1)  # noqa: SIM115 - lives as long as we do
    instance = str(config["instance"])

    def write(**fields: Any) -> None:
        fields.update(t=time.time(), instance=instance, pid=os.getpid())
        with lock:
            log_file.write(json.dumps(fields) + "\n")

    jobs = [dict(job) for job in config["jobs"]]
    resolve_go(jobs, config.get("go_file"), write)
    offset = float(config.get("clock_offset", 0.0))
    scheduler = Scheduler(build_backend(config["url"]), instance_id=instance,
                          clock=OffsetClock(offset) if offset else None,
                          **config.get("options", {}))
    for job in jobs:
        getattr(scheduler, job["kind"])(job["name"], job["when"], _handler(job, write),
                                        **job.get("options", {}))
    log_events(scheduler, write)
    try:
        serve(scheduler, config.get("stop_timeout", 5), write)
    finally:
        write(kind="exit")
    return 0


if __name__ == "__main__":
    sys.exit(main())
