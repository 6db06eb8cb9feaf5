"""A payment job that must never run twice: ``max_attempts=1`` and writes keyed by ``ctx.slot``.

    python examples/billing.py                     # SQLite store in the temp folder
    python examples/billing.py --seconds 15        # exit by itself, then print history + ledger
    python examples/billing.py --crash-once        # die mid-run the first time this copy wins
    python examples/billing.py --backend redis://localhost:6379?prefix=billing:

Run two copies with ``--crash-once``: whichever wins a slot first dies half-way through
charging (once per ledger file). The other copy sees the lease expire, but
``max_attempts=1`` forbids a second attempt, so the slot is **not retried**: it stays
``interrupted`` in the history for a person to look at. Every charge is written with the
key ``(customer, slot)`` (``INSERT OR IGNORE``), so even an overlap after a freeze, or a
person re-running that slot by hand (``--recharge SLOT``), cannot charge a customer twice
for one period.

In production the schedule would be a cron such as ``"0 3 1 * *"`` (03:00 on the 1st);
the demo charges every 4 seconds. Environment: ``ANARCHON_BACKEND`` (store URL),
``LEDGER_DB`` (the ledger SQLite file the copies share).
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sqlite3
import tempfile
import threading
from datetime import datetime

from anarchon import Event, RunContext, Scheduler, from_url

JOB = "charge-subscriptions"
CUSTOMERS = {"acme": 4900, "globex": 9900, "initech": 1900}
TMP = tempfile.gettempdir()


def say(text: str) -> None:
    print(f"[pid {os.getpid()}] {datetime.now():%H:%M:%S}  {text}", flush=True)


class Ledger:
    """Charges keyed by ``(customer, slot)``: a second write for one period is a no-op."""

    def __init__(self, path: str) -> None:
        self.path = path
        with self._connect() as db:
            db.execute("CREATE TABLE IF NOT EXISTS charges (customer TEXT NOT NULL, "
                       "slot INTEGER NOT NULL, cents INTEGER NOT NULL, attempt INTEGER, "
                       "charged_by TEXT, PRIMARY KEY (customer, slot))")
            db.execute("CREATE TABLE IF NOT EXISTS demo_crash (once INTEGER PRIMARY KEY)")

    def _connect(self) -> sqlite3.Connection:
        return sqlite3.connect(self.path, timeout=10)

    def charge(self, customer: str, slot: int, cents: int, attempt: int, by: str) -> bool:
        """Record one charge; False if this period was already charged (idempotent)."""
        with self._connect() as db:
            cursor = db.execute("INSERT OR IGNORE INTO charges VALUES (?, ?, ?, ?, ?)",
                                (customer, slot, cents, attempt, by))
            return cursor.rowcount == 1

    def first_crash(self) -> bool:
        """True for the one caller, across all copies, that may crash (``--crash-once``)."""
        with self._connect() as db:
            return db.execute("INSERT OR IGNORE INTO demo_crash VALUES (1)").rowcount == 1

    def summary(self) -> tuple[int, int, int]:
        """(charges, periods, duplicates): duplicates is always 0 thanks to the key."""
        with self._connect() as db:
            charges, periods = db.execute(
                "SELECT COUNT(*), COUNT(DISTINCT slot) FROM charges").fetchone()
            duplicates = db.execute(
                "SELECT COUNT(*) FROM (SELECT customer, slot FROM charges "
                "GROUP BY customer, slot HAVING COUNT(*) > 1)").fetchone()[0]
        return int(charges), int(periods), int(duplicates)


def charge_period(ledger: Ledger, slot: int, attempt: int, crash: bool = False) -> int:
    """Charge every customer for the period ``slot``; returns how many were new."""
    new = 0
    for number, (customer, cents) in enumerate(CUSTOMERS.items()):
        if crash and number == 1:
            say(f"crashing half-way through slot {slot} (os._exit, no clean-up)")
            os._exit(3)
        if ledger.charge(customer, slot, cents, attempt, f"pid {os.getpid()}"):
            new += 1
    return new


def build(url: str, ledger: Ledger, crash_once: bool) -> Scheduler:
    """Every copy builds the same scheduler."""
    scheduler = Scheduler(from_url(url), lease="2s", heartbeat="500ms", jitter="300ms")

    @scheduler.every(JOB, "4s", max_attempts=1, timeout="30s")
    def charge(ctx: RunContext) -> None:
        say(f"charging slot {ctx.slot} ({ctx.scheduled_at:%H:%M:%S}), attempt {ctx.attempt}")
        armed = crash_once and ledger.first_crash()
        if armed:
            ctx.signal.wait(0.5)  # give the heartbeat time to record the claim
        new = charge_period(ledger, ctx.slot, ctx.attempt, crash=armed)
        say(f"charged {new} customer(s) for slot {ctx.slot}")

    def on_event(event: Event) -> None:
        if event.type == "skip":
            say(f"slot {event.slot} skipped ({event.reason})")
        elif event.type in ("failure", "error", "lost"):
            say(f"{event.type}: {event.error}")

    for kind in ("skip", "failure", "error", "lost"):
        scheduler.on(kind, on_event)
    return scheduler


def report(scheduler: Scheduler, ledger: Ledger) -> None:
    """History from all instances, and the ledger's check."""
    print("history (newest first, all instances):", flush=True)
    for record in scheduler.history(JOB, 10):
        note = "  <- not retried (max_attempts=1)" if record.status == "interrupted" else ""
        print(f"  slot {record.slot}  attempt {record.attempt}  {record.status:11} "
              f"{record.instance_id}{note}", flush=True)
    charges, periods, duplicates = ledger.summary()
    print(f"ledger: {charges} charge(s) for {periods} period(s); {duplicates} customer(s) "
          "charged twice for one period", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else "")
    parser.add_argument("--backend", default=os.environ.get("ANARCHON_BACKEND")
                        or f"sqlite:///{os.path.join(TMP, 'anarchon-billing.db')}")
    parser.add_argument("--ledger", default=os.environ.get("LEDGER_DB")
                        or os.path.join(TMP, "anarchon-billing-ledger.db"))
    parser.add_argument("--seconds", type=float, default=None,
                        help="stop by itself after this many seconds")
    parser.add_argument("--crash-once", action="store_true",
                        help="die half-way through the first slot this copy wins")
    parser.add_argument("--recharge", type=int, metavar="SLOT",
                        help="re-run one period by hand (safe: charges are keyed by slot)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format="[pid %(process)d] %(message)s")
    ledger = Ledger(args.ledger)
    if args.recharge is not None:
        say(f"re-ran slot {args.recharge}: {charge_period(ledger, args.recharge, 0)} new "
            "charge(s)")
        return
    scheduler = build(args.backend, ledger, args.crash_once)
    say(f"billing every 4 s on {scheduler.backend.name}, max_attempts=1 (Ctrl+C to stop)")
    if args.seconds is None:
        scheduler.run()
    else:
        done = threading.Event()
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, lambda *_: done.set())
        scheduler.start()
        done.wait(args.seconds)
        scheduler.stop()
    reader = Scheduler(from_url(args.backend))  # a process with no jobs can read history
    try:
        report(reader, ledger)
    finally:
        reader.close()


if __name__ == "__main__":
    main()
