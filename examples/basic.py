"""anarchon on Redis: run this file in two or three terminals.

    pip install "anarchon[redis]"
    python examples/basic.py                    # Redis at $REDIS_URL (redis://localhost:6379)
    python examples/basic.py --seconds 15       # exit by itself after 15 s
    python examples/basic.py --backend postgresql://postgres@localhost/test

What you see, with three copies running:

* ``sync`` (every 10 s) runs **once per slot** across all terminals: one terminal prints
  ``sync ... ran``, the others ``sync ... skipped (taken by another instance)``.
* ``report`` (every 30 s, 20 s of work) runs in one terminal. Press Ctrl+C **in that
  terminal**: it stops gracefully, hands the run over, and within two heartbeats another
  terminal prints ``report ... attempt 2 started (takeover)``.

The backend is ``--backend URL``, else ``$ANARCHON_BACKEND``, else ``$REDIS_URL``; keys
live under the prefix ``basic-example:`` unless the URL sets ``?prefix=``.
"""

from __future__ import annotations

import argparse
import os
import signal
import threading
from datetime import datetime

from anarchon import Backend, Event, RunContext, Scheduler, from_url

REDIS_URL = os.environ.get("REDIS_URL") or "redis://localhost:6379"


def say(text: str) -> None:
    print(f"[pid {os.getpid()}] {datetime.now():%H:%M:%S}  {text}", flush=True)


def slot_time(event: Event) -> str:
    return f"{datetime.fromtimestamp((event.slot or 0) / 1000):%H:%M:%S}"


def backend_for(url: str) -> Backend:
    """The backend for ``url``; Redis/Valkey keys go under ``basic-example:`` by default."""
    if url.startswith(("redis", "valkey", "unix")) and "prefix=" not in url:
        return from_url(url, prefix="basic-example:")
    return from_url(url)


def build(url: str, report_every: str = "30s") -> Scheduler:
    """The scheduler with both jobs; every terminal builds the same one."""
    scheduler = Scheduler(backend_for(url), lease="6s", heartbeat="1s", jitter="500ms")

    @scheduler.every("sync", "10s")
    def sync(ctx: RunContext) -> None:
        say(f"sync   slot {ctx.scheduled_at:%H:%M:%S} ran here (attempt {ctx.attempt})")

    @scheduler.every("report", report_every)
    def report(ctx: RunContext) -> None:
        say(f"report slot {ctx.scheduled_at:%H:%M:%S} working for 20 s — press Ctrl+C here "
            "to hand it over")
        if ctx.signal.wait(20):  # the work, interrupted by Ctrl+C
            ctx.signal.raise_if_aborted()  # raising on abort hands the run over
        say(f"report slot {ctx.scheduled_at:%H:%M:%S} done")

    def on_event(event: Event) -> None:
        if event.type == "start" and event.name == "report":
            say(f"report slot {slot_time(event)} attempt {event.attempt} started ({event.reason})")
        elif event.type == "skip":
            extra = " by another instance" if event.reason == "taken" else ""
            say(f"{event.name:6} slot {slot_time(event)} skipped ({event.reason}{extra})")
        elif event.type == "interrupted":
            say(f"{event.name:6} slot {slot_time(event)} attempt {event.attempt} "
                f"interrupted ({event.reason}): handed over")
        elif event.type in ("failure", "error", "lost"):
            say(f"{event.name} {event.type}: {event.error}")

    for kind in ("start", "skip", "interrupted", "failure", "error", "lost"):
        scheduler.on(kind, on_event)
    return scheduler


def run_for(scheduler: Scheduler, seconds: float | None) -> None:
    """``scheduler.run()``; with ``seconds``, stop by itself after that long."""
    if seconds is None:
        scheduler.run()
        return
    done = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: done.set())
    scheduler.start()
    done.wait(seconds)
    scheduler.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else "")
    parser.add_argument("--backend", default=os.environ.get("ANARCHON_BACKEND") or REDIS_URL,
                        help="backend URL (default: $ANARCHON_BACKEND or $REDIS_URL)")
    parser.add_argument("--seconds", type=float, default=None,
                        help="stop by itself after this many seconds")
    parser.add_argument("--report-every", default="30s", help="interval of report (30s)")
    args = parser.parse_args()
    scheduler = build(args.backend, args.report_every)
    say(f"up on {scheduler.backend.name}; next sync at {scheduler.next_run('sync'):%H:%M:%S}, "
        f"next report at {scheduler.next_run('report'):%H:%M:%S} (Ctrl+C to stop)")
    run_for(scheduler, args.seconds)
    say("stopped")


if __name__ == "__main__":
    main()
