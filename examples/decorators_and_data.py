"""Module-level decorators, decorated methods and run data.

    python examples/decorators_and_data.py                  # SQLite in the temp folder
    python examples/decorators_and_data.py --seconds 6      # exit by itself
    python examples/decorators_and_data.py --backend redis://localhost:6379?prefix=dd:

* ``@anarchon.every(...)`` at module level registers on the *named* scheduler
  ``"default"`` — before it is configured; ``anarchon.configure(backend=...)`` creates it
  later and picks the jobs up; ``anarchon.start_all()``/``stop_all()`` run every named
  scheduler.
* A method decorated in a class body is registered **for each instance when it is
  constructed** (no base class, no explicit call), bound to that instance.
* ``data=`` at scheduler, job and ``run_now`` level reaches the handler as ``ctx.data``:
  dicts merge key by key (the more specific level wins), any other value replaces, and a
  callable is called at the start of every run (here: a fresh token per run). Data is
  never stored or sent to other instances, so it may hold clients and secrets.
"""

from __future__ import annotations

import argparse
import itertools
import os
import signal
import tempfile
import threading
from datetime import datetime
from typing import Any

import anarchon
from anarchon import RunContext

_tokens = itertools.count(1)


def say(text: str) -> None:
    print(f"{datetime.now():%H:%M:%S}  {text}", flush=True)


def fresh_credentials() -> dict[str, Any]:
    """Called at the start of each run of the job that uses it."""
    return {"token": f"tok-{next(_tokens)}"}


@anarchon.every("cleanup", "3s", data={"table": "sessions", "level": "job"})  # type: ignore[untyped-decorator,unused-ignore]
def cleanup(ctx: RunContext) -> None:
    """A plain function on the "default" scheduler, registered at import time."""
    say(f"cleanup  ({ctx.reason}) data={ctx.data}")


@anarchon.every("rotate", "3s", offset="1s", data=fresh_credentials)  # type: ignore[untyped-decorator,unused-ignore]
def rotate(ctx: RunContext) -> None:
    """A callable ``data``: merged over the scheduler's dict, fresh for every run."""
    say(f"rotate   ({ctx.reason}) data={ctx.data}")


class Mailer:
    """Its method becomes a job for each Mailer constructed (here: one)."""

    def __init__(self, sender: str) -> None:
        self.sender = sender

    @anarchon.every("mailer-flush", "3s", offset="2s", data={"batch": 50})  # type: ignore[untyped-decorator,unused-ignore]
    def flush(self, ctx: RunContext) -> None:
        say(f"flush    ({ctx.reason}) from {self.sender} data={ctx.data}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else "")
    parser.add_argument("--backend", default=os.environ.get("ANARCHON_BACKEND") or
                        f"sqlite:///{os.path.join(tempfile.gettempdir(), 'anarchon-dd.db')}")
    parser.add_argument("--seconds", type=float, default=None,
                        help="stop by itself after this many seconds")
    args = parser.parse_args()

    # The scheduler-level data: shared by every job of "default" (a client, a setting …).
    scheduler = anarchon.configure(backend=anarchon.from_url(args.backend), jitter="200ms",
                                   data={"env": "demo", "level": "scheduler"})
    Mailer("ops@example.com")  # registers "mailer-flush" for this instance
    say(f"jobs on 'default': {scheduler.job_names}")

    record = scheduler.run_now("cleanup", data={"level": "run_now", "dry_run": True})
    say(f"run_now -> {record.status}; the run_now level won 'level'")

    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    anarchon.start_all()
    try:
        stop.wait(args.seconds)
    finally:
        anarchon.stop_all()
    say("stopped")


if __name__ == "__main__":
    main()
