"""A nightly export that must run even after a full outage: ``catch_up``.

    python examples/nightly_export.py                 # the real schedule: 02:00 Europe/Berlin
    python examples/nightly_export.py --seconds 5     # show the next runs, exit after 5 s
    python examples/nightly_export.py --demo          # the catch-up, shown in ~15 seconds

The job is ``cron("nightly-export", "0 2 * * *", timezone="Europe/Berlin",
catch_up="6h", overlap="skip")``: if every instance was down at 02:00 (a deploy, an
outage), the first instance to start again before 08:00 runs the missed export, once,
cluster-wide, with ``ctx.reason == "catch-up"``. Only the newest missed slot runs, and
only if the job was already known to the store before it (a first deployment has
nothing to catch up). ``overlap="skip"`` keeps a slow export from running twice at once;
a deploy hands a running export over to a backup.

``--demo`` does the same with a 5-second schedule in one process: it runs the job once,
stops the scheduler (the "outage"), lets a slot pass, starts a new scheduler and shows the
missed slot running as ``catch-up``. Store: ``--backend URL`` or ``$ANARCHON_BACKEND``
(default: a SQLite file in the temp folder).
"""

from __future__ import annotations

import argparse
import os
import signal
import tempfile
import threading
import time
from datetime import datetime
from zoneinfo import ZoneInfo

from anarchon import RunContext, Scheduler, from_url

DEMO_EVERY = 5.0
BERLIN = ZoneInfo("Europe/Berlin")


def say(text: str) -> None:
    print(f"{datetime.now():%H:%M:%S.%f}"[:-3] + f"  {text}", flush=True)


#: where exports go (``--demo`` writes to a temporary folder it removes at the end)
EXPORT_FOLDER = os.environ.get("EXPORT_FOLDER") or tempfile.gettempdir()


def export(ctx: RunContext) -> None:
    """The export: a file named after the slot, so a re-run overwrites rather than adds."""
    target = os.path.join(EXPORT_FOLDER, f"export-{ctx.slot}.csv")
    with open(target, "w") as handle:
        handle.write(f"exported for {ctx.scheduled_at.isoformat()}\n")
    say(f"export for slot {ctx.scheduled_at:%H:%M:%S} written ({ctx.reason}, attempt "
        f"{ctx.attempt}) -> {target}")


def nightly(url: str) -> Scheduler:
    """The production shape of the job."""
    scheduler = Scheduler(from_url(url))
    scheduler.cron("nightly-export", "0 2 * * *", export, timezone="Europe/Berlin",
                   catch_up="6h", overlap="skip", timeout="2h")
    return scheduler


def demo_scheduler(url: str) -> tuple[Scheduler, threading.Event]:
    """The demo job (every 5 s, catch_up 1 min) and an event set on each success."""
    scheduler = Scheduler(from_url(url), lease="3s", heartbeat="500ms", jitter="200ms")
    scheduler.every("export-demo", DEMO_EVERY, export, catch_up="1m")
    done = threading.Event()
    scheduler.on("success", lambda event: done.set())
    scheduler.on("error", lambda event: say(f"store error: {event.error}"))
    return scheduler, done


def demo(url: str, deadline: float) -> None:
    """Run once, go down across a slot, come back: the missed slot is caught up."""
    first, ran = demo_scheduler(url)
    say("1. scheduler up; waiting for one normal run")
    first.start()
    if not ran.wait(DEMO_EVERY + 3):
        raise SystemExit("no run within one interval")
    first.stop()
    missed = first.next_run("export-demo")
    assert missed is not None
    say(f"2. every instance is down; slot {missed.astimezone():%H:%M:%S} passes with nobody "
        "running")
    time.sleep(max(0.0, missed.timestamp() - time.time()) + 1.0)
    second, caught = demo_scheduler(url)
    say("3. an instance starts again: it catches up the missed slot")
    second.start()
    try:
        if not caught.wait(max(1.0, deadline - time.monotonic())):
            raise SystemExit("the missed slot was not caught up")
    finally:
        second.stop()
    reader = Scheduler(from_url(url))
    try:
        last = reader.last_run("export-demo")
    finally:
        reader.close()
    if last is not None:
        say(f"last run: slot {last.scheduled_at.astimezone():%H:%M:%S}, reason {last.reason}, "
            f"{last.status}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else "")
    parser.add_argument("--backend", default=os.environ.get("ANARCHON_BACKEND") or
                        f"sqlite:///{os.path.join(tempfile.gettempdir(), 'anarchon-export.db')}")
    parser.add_argument("--seconds", type=float, default=None,
                        help="stop by itself after this many seconds")
    parser.add_argument("--demo", action="store_true", help="show catch-up in ~15 seconds")
    args = parser.parse_args()
    if args.demo:
        global EXPORT_FOLDER
        with tempfile.TemporaryDirectory(prefix="anarchon-export-demo-") as EXPORT_FOLDER:
            demo(args.backend, time.monotonic() + (args.seconds or 30.0))
        return
    scheduler = nightly(args.backend)
    for slot in scheduler.next_runs("nightly-export", 3):
        say(f"next export: {slot:%Y-%m-%d %H:%M} UTC = "
            f"{slot.astimezone(BERLIN):%H:%M} in Berlin")
    if args.seconds is None:
        scheduler.run()
        return
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    scheduler.start()
    stop.wait(args.seconds)
    scheduler.stop()
    say("stopped")


if __name__ == "__main__":
    main()
