"""An outbox sender on a claim-only broker backend (RabbitMQ by default, or NATS).

The job "sends whatever is pending": every few seconds one instance — whichever wins the
slot on the broker — takes the pending rows of an outbox table and sends them. Nothing
special is needed: a lost run (the winner crashed) is fine because the next slot sends
whatever is still pending, and each row is marked with the slot that sent it, so a row is
sent once even if two runs ever overlapped.

Run it (start several copies in separate terminals to see only one send per slot)::

    python examples/broker_notifications.py                 # RabbitMQ, amqp://localhost
    ANARCHON_BROKER=nats python examples/broker_notifications.py      # NATS JetStream
    python examples/broker_notifications.py --seconds 10    # exit by itself after 10 s
    python examples/broker_notifications.py --backend amqp://guest:guest@localhost:5672/

Environment: ``ANARCHON_BROKER`` (``rabbitmq`` or ``nats``), ``ANARCHON_RABBITMQ_URL``
(default ``amqp://guest:guest@localhost:5672/``), ``ANARCHON_NATS_URL`` (default
``nats://localhost:4222``), ``OUTBOX_DB`` (the outbox SQLite file shared by the copies,
default ``outbox.db`` in the temp folder). Needs ``pip install "anarchon[rabbitmq]"`` or
``"anarchon[nats]"``.

Claim-only brokers pick one winner per slot but hold no lease: options such as
``max_attempts`` or ``overlap`` raise ``TypeError`` here (use a lease backend for them).
"""

from __future__ import annotations

import argparse
import os
import signal
import sqlite3
import tempfile
import threading
from datetime import datetime

from anarchon import Event, RunContext, Scheduler
from anarchon.backends import Backend, from_url

INTERVAL = "3s"


def backend_from_env() -> Backend:
    """RabbitMQ unless ``ANARCHON_BROKER=nats``."""
    broker = os.environ.get("ANARCHON_BROKER", "rabbitmq").lower()
    if broker == "nats":
        url = os.environ.get("ANARCHON_NATS_URL") or "nats://localhost:4222"
        return from_url(url, stream="OUTBOX_EXAMPLE", prefix="outbox-example.",
                        duplicate_window="2m")
    if broker == "rabbitmq":
        url = os.environ.get("ANARCHON_RABBITMQ_URL") or "amqp://guest:guest@localhost:5672/"
        return from_url(url, prefix="outbox-example.", slot_ttl="2m")
    raise SystemExit(f"ANARCHON_BROKER must be 'rabbitmq' or 'nats', got {broker!r}")


class Outbox:
    """A tiny outbox table: the application inserts rows, the job sends them."""

    def __init__(self, path: str) -> None:
        self.path = path
        with self._connect() as db:
            db.execute("CREATE TABLE IF NOT EXISTS outbox (id INTEGER PRIMARY KEY, "
                       "recipient TEXT, body TEXT, sent_slot INTEGER)")

    def _connect(self) -> sqlite3.Connection:
        return sqlite3.connect(self.path, timeout=10, isolation_level=None)

    def add(self, recipient: str, body: str) -> None:
        with self._connect() as db:
            db.execute("INSERT INTO outbox (recipient, body) VALUES (?, ?)", (recipient, body))

    def take(self, slot: int) -> list[tuple[int, str, str]]:
        """Mark the pending rows as sent by ``slot`` and return them (idempotent per slot)."""
        db = self._connect()
        try:
            db.execute("BEGIN IMMEDIATE")
            db.execute("UPDATE outbox SET sent_slot = ? WHERE sent_slot IS NULL", (slot,))
            rows = db.execute("SELECT id, recipient, body FROM outbox WHERE sent_slot = ? "
                              "ORDER BY id", (slot,)).fetchall()
            db.execute("COMMIT")
            return [(int(i), str(r), str(b)) for i, r, b in rows]
        finally:
            db.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=None,
                        help="stop by itself after this many seconds")
    parser.add_argument("--backend", default=os.environ.get("ANARCHON_BACKEND"),
                        help="a RabbitMQ or NATS URL (default: from ANARCHON_BROKER)")
    args = parser.parse_args()

    outbox = Outbox(os.environ.get("OUTBOX_DB")
                    or os.path.join(tempfile.gettempdir(), "outbox.db"))
    me = f"pid {os.getpid()}"
    for n in range(3):  # the application queues a few notifications
        outbox.add(f"user{n}@example.com", f"hello from {me} #{n}")

    backend = from_url(args.backend) if args.backend else backend_from_env()
    scheduler = Scheduler(backend, jitter=0.5, max_late=30)

    @scheduler.every("send-notifications", INTERVAL)
    def send_pending(ctx: RunContext) -> None:
        rows = outbox.take(ctx.slot)
        for row_id, recipient, body in rows:
            print(f"  sent #{row_id} to {recipient}: {body}", flush=True)
        print(f"[{me}] slot {ctx.scheduled_at:%H:%M:%S}: sent {len(rows)} notification(s)",
              flush=True)

    def on_event(event: Event) -> None:
        if event.type == "skip":
            print(f"[{me}] slot {datetime.fromtimestamp((event.slot or 0) / 1000):%H:%M:%S}: "
                  f"skipped ({event.reason}: another instance sends it)", flush=True)
        elif event.type in ("error", "failure"):
            print(f"[{me}] {event.type}: {event.error}", flush=True)

    for kind in ("skip", "error", "failure"):
        scheduler.on(kind, on_event)

    print(f"[{me}] sending pending notifications every {INTERVAL} on {backend.name} "
          "(Ctrl-C to stop)", flush=True)
    if args.seconds is None:
        scheduler.run()
        return
    done = threading.Event()
    signal.signal(signal.SIGINT, lambda *_: done.set())
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    scheduler.start()
    done.wait(args.seconds)
    last = scheduler.last_run("send-notifications")  # from any instance
    if last is not None:
        print(f"[{me}] last run: slot {last.scheduled_at:%H:%M:%S} by {last.instance_id}: "
              f"{last.status}", flush=True)
    scheduler.stop()


if __name__ == "__main__":
    main()
