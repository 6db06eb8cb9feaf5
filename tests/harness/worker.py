"""One instance of a test cluster: ``python -m tests.harness.worker CONFIG_JSON``.

Run by :class:`tests.harness.cluster.WorkerCluster` for the cluster and fault suites and
the hand-over benchmark. Public API only (``Scheduler``, ``from_url``, the ``Clock``
protocol), so it survives changes inside the engine. Every line goes to one shared JSONL
log opened with ``O_APPEND`` and written with one ``os.write`` per line, so lines of
several processes never interleave. Config keys:

* ``url``, ``instance``, ``log``, ``options`` (scheduler options), ``stop_timeout``;
* ``jobs``: ``{kind, name, when, options, duration, blocking, raise_on_abort}``;
  ``blocking`` makes the handler an ``async def`` that calls ``time.sleep(duration)`` (it
  blocks the event loop), else a plain handler waits ``duration`` on its abort signal and
  then raises if it was aborted (unless ``raise_on_abort`` is false);
* ``handlers``: handler names this instance offers for dynamic jobs
  (``add_job(handler=...)``); each logs like a job's handler, with ``duration`` 0;
* ``clock_offset``: the engine's wall clock is shifted by this (an injected clock);
* ``faked_offset``: seconds the process clock is shifted by from outside (``faketime``);
  subtracted from every logged ``t`` so that all lines are in real time;
* ``start_at``: before starting, wait until the (real) fraction of the second is this;
* ``mode``: ``"start"`` (``start()``, log ``ready``, wait for SIGTERM) or ``"run"``
  (log ``ready``, then ``Scheduler.run()``, which blocks and handles the signals itself);
* ``events``: the event types logged (default all); ``go_file`` as in
  :mod:`anarchon_lab.scenarios.worker` (``when="@go"``);
* ``django``: database aliases made by :func:`tests.harness.django_stores.prepare` (its
  ``aliases_of``) for a ``django://ALIAS`` URL.

Every line has ``t`` (wall time) and ``m`` (``time.monotonic()``, the same clock in every
process of the machine, whatever network namespace it is in).

Records of the ``anarchon`` logger are logged as ``kind="log"`` lines (``level``, ``msg``).
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
import time
from typing import Any

from anarchon_lab.scenarios.worker import EVENTS, Write, log_events, resolve_go, serve

from anarchon import RunContext, Scheduler, SystemClock, from_url


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
    raise_on_abort = bool(job.get("raise_on_abort", True))

    def begin(ctx: RunContext) -> None:
        write(kind="begin", job=ctx.name, slot=ctx.slot, attempt=ctx.attempt,
              reason=ctx.reason, params=ctx.params)

    if job.get("blocking"):
        async def blocking(ctx: RunContext) -> None:
            begin(ctx)
            time.sleep(duration)  # noqa: ASYNC251 - the fault: it blocks the event loop
            write(kind="end", job=ctx.name, slot=ctx.slot, attempt=ctx.attempt,
                  aborted=ctx.signal.aborted, signal=ctx.signal.reason)

        return blocking

    def plain(ctx: RunContext) -> None:
        begin(ctx)
        # the instant the signal fires, on the thread that fires it
        ctx.signal.on_abort(lambda: write(kind="abort", job=ctx.name, slot=ctx.slot,
                                          attempt=ctx.attempt, signal=ctx.signal.reason))
        aborted = ctx.signal.wait(duration)
        write(kind="end", job=ctx.name, slot=ctx.slot, attempt=ctx.attempt, aborted=aborted,
              signal=ctx.signal.reason)
        if aborted and raise_on_abort:
            ctx.signal.raise_if_aborted()

    return plain


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
        fields.update(t=time.time() - faked, m=time.monotonic(), instance=instance,
                      pid=os.getpid())
        os.write(fd, (json.dumps(fields) + "\n").encode())

    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    logging.getLogger("anarchon").addHandler(LogLines(write))
    if config.get("django"):
        from tests.harness.django_stores import use

        use(config["django"])
    jobs = [dict(job) for job in config["jobs"]]
    resolve_go(jobs, config.get("go_file"), write, pause=_pause)
    offset = float(config.get("clock_offset", 0.0))
    scheduler = Scheduler(from_url(config["url"]), instance_id=instance,
                          clock=SkewedClock(offset) if offset else None,
                          **config.get("options", {}))
    for job in jobs:
        getattr(scheduler, job["kind"])(job["name"], job["when"], _handler(job, write),
                                        **job.get("options", {}))
    for name in config.get("handlers", ()):
        scheduler.handler(name, _handler({}, write))
    log_events(scheduler, write, config.get("events", EVENTS))
    if config.get("start_at") is not None:
        _wait_for_fraction(float(config["start_at"]), faked)
    stop_timeout = float(config.get("stop_timeout", 5))
    try:
        if config.get("mode", "start") == "run":
            write(kind="ready")
            scheduler.run(stop_timeout=stop_timeout)
        else:
            serve(scheduler, stop_timeout, write)
    except BaseException as exc:
        write(kind="exit", error=repr(exc))
        raise
    write(kind="exit", error=None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
