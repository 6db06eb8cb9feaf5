"""Scheduled Dramatiq actors with anarchon: one message per slot from any number of
scheduler instances, and the real outcome of each message in anarchon's history.

The broker comes from ``DRAMATIQ_BROKER_URL`` (``redis://…`` for Dramatiq's Redis broker,
``amqp://…`` for RabbitMQ; default ``redis://127.0.0.1:6379/0``); anarchon's store from
``ANARCHON_BACKEND`` (default Redis with the prefix ``demo:``).

As a deployment, on every machine::

    dramatiq examples.dramatiq_app                       # workers
    anarchon-dramatiq examples.dramatiq_app              # schedulers (any number)

(``python -m anarchon_dramatiq`` is the same command.) As a self-contained demo, one
process with a worker and two scheduler instances for 12 seconds, then the history::

    python examples/dramatiq_app.py [--seconds 12] [--backend URL]
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import dramatiq
from dramatiq import Broker
from dramatiq.middleware import CurrentMessage

import anarchon_dramatiq as ad


def arguments() -> argparse.Namespace:
    """The demo's options (parsed before the broker is set up: it needs the store)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else "")
    parser.add_argument("--seconds", type=float, default=12.0, help="how long to run (12)")
    parser.add_argument("--backend", default=None,
                        help="anarchon store URL (default: $ANARCHON_BACKEND or Redis)")
    return parser.parse_args()


ARGS = arguments() if __name__ == "__main__" else None
BROKER_URL = os.environ.get("DRAMATIQ_BROKER_URL") or "redis://127.0.0.1:6379/0"
STORE_URL = ((ARGS.backend if ARGS else None) or os.environ.get("ANARCHON_BACKEND")
             or "redis://127.0.0.1:6379/0?prefix=demo:")
os.environ.setdefault("ANARCHON_BACKEND", STORE_URL)  # read by anarchon-dramatiq


def make_broker(url: str) -> Broker:
    if url.startswith(("amqp://", "amqps://")):
        from dramatiq.brokers.rabbitmq import RabbitmqBroker

        return RabbitmqBroker(url=url, confirm_delivery=True)
    from dramatiq.brokers.redis import RedisBroker

    return RedisBroker(url=url, namespace="anarchon-demo")  # type: ignore[no-untyped-call]


broker = make_broker(BROKER_URL)
broker.add_middleware(CurrentMessage())
# Workers record each tracked message's outcome (before Retries: see AnarchonMiddleware).
ad.install_middleware(broker, STORE_URL, lease="10s", heartbeat="2s")
dramatiq.set_broker(broker)


def slot_of_current_message() -> int | None:
    """The slot a message was sent for: key idempotent writes by it."""
    message = CurrentMessage.get_current_message()
    return None if message is None else message.options.get("anarchon_slot")


@ad.every("2s", track=True)  # the job is named "refresh_cache", after the actor
@dramatiq.actor(queue_name="anarchon-demo", max_retries=0)
def refresh_cache() -> None:
    print(f"refresh_cache for slot {slot_of_current_message()}", flush=True)


# Marks take send_with_options arguments too: args/kwargs, delay, any message option.
# resend=True: re-send a slot whose outcome has not arrived within queue_lease (a tracked
# slot is otherwise sent once), up to max_attempts sends.
@ad.every("5s", track=True, resend=True, name="flaky-report", max_attempts=2,
          kwargs={"kind": "daily"})
@dramatiq.actor(queue_name="anarchon-demo", max_retries=1, min_backoff=500, max_backoff=500)
def report(kind: str) -> None:
    if random.random() < 0.5:
        raise RuntimeError(f"{kind} report failed (the demo fails half the time)")
    print(f"{kind} report for slot {slot_of_current_message()}", flush=True)



def demo(seconds: float) -> None:
    """A worker and two scheduler instances in this process, then the history."""
    from anarchon import Scheduler, from_url

    worker = dramatiq.Worker(broker, worker_threads=2, worker_timeout=100)
    worker.start()
    schedulers = [ad.build_scheduler(STORE_URL, broker, lease="10s", heartbeat="2s",
                                     jitter="200ms", instance_id=f"demo-{i}")
                  for i in (1, 2)]
    for scheduler in schedulers:
        scheduler.on("skip", lambda e: print(f"  {e.instance_id}: {e.name} slot {e.slot} "
                                             f"skipped ({e.reason})", flush=True))
        scheduler.start()
    try:
        time.sleep(seconds)
    finally:
        for scheduler in schedulers:
            scheduler.stop()
        worker.join()
        worker.stop()
    reader = Scheduler(from_url(STORE_URL))
    for name in ("refresh_cache", "flaky-report"):
        print(f"\nhistory of {name} (newest first, from all instances):")
        for record in reader.history(name, 8):
            print(f"  slot {record.slot} attempt {record.attempt} {record.status:<11} "
                  f"by {record.instance_id} {record.error or ''}")
    reader.close()
    broker.close()


if __name__ == "__main__":
    assert ARGS is not None
    try:
        demo(ARGS.seconds)
    except KeyboardInterrupt:
        print("interrupted")
