"""A cheap, frequent job where a lost run is fine: jitter and a small ``max_late``.

    python examples/cache_refresh.py                          # SQLite in the temp folder
    python examples/cache_refresh.py --seconds 10             # exit by itself
    python examples/cache_refresh.py --backend redis://localhost:6379?prefix=cache:
    python examples/cache_refresh.py --backend nats://localhost:4222   # brokers work too

Every 2 seconds one instance refreshes a cache. ``jitter="1s"`` spreads the instances'
claims over a second so they do not hit the store at the same instant; ``max_late="3s"``
refuses a claim that arrives more than 3 s after the slot (judged by the store's clock):
after a pause or a reconnect, a stale refresh is skipped as ``late`` instead of running
behind — the next slot refreshes anyway. The job uses no lease-only option, so it runs on
every backend, the claim-only brokers (RabbitMQ, NATS) included.

Store: ``--backend URL`` or ``$ANARCHON_BACKEND`` (default: a SQLite file in the temp
folder).
"""

from __future__ import annotations

import argparse
import os
import signal
import tempfile
import threading
import time
from datetime import datetime

from anarchon import Event, RunContext, Scheduler, from_url

CACHE: dict[str, object] = {}


def say(text: str) -> None:
    print(f"[pid {os.getpid()}] {datetime.now():%H:%M:%S.%f}"[:-3] + f"  {text}", flush=True)


def refresh(ctx: RunContext) -> None:
    """Rebuild the cache; the delay since the slot shows the jitter."""
    delay = time.time() - ctx.slot / 1000
    CACHE.update(refreshed_for=ctx.slot, entries=42)
    say(f"cache refreshed for slot {ctx.scheduled_at:%H:%M:%S} ({delay:.2f} s after the "
        "slot: jitter)")


def build(url: str) -> Scheduler:
    """Same job on every instance."""
    scheduler = Scheduler(from_url(url), jitter="1s", max_late="3s")
    scheduler.every("refresh-cache", "2s", refresh)

    def on_event(event: Event) -> None:
        if event.type == "skip":
            why = {"taken": "another instance refreshed it",
                   "late": "too late, the next slot will refresh"}.get(event.reason or "", "")
            say(f"slot {datetime.fromtimestamp((event.slot or 0) / 1000):%H:%M:%S} skipped "
                f"({event.reason}: {why})")
        else:
            say(f"{event.type}: {event.error}")

    for kind in ("skip", "failure", "error"):
        scheduler.on(kind, on_event)
    return scheduler


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else "")
    parser.add_argument("--backend", default=os.environ.get("ANARCHON_BACKEND") or
                        f"sqlite:///{os.path.join(tempfile.gettempdir(), 'anarchon-cache.db')}")
    parser.add_argument("--seconds", type=float, default=None,
                        help="stop by itself after this many seconds")
    args = parser.parse_args()
    scheduler = build(args.backend)
    say(f"refreshing every 2 s on {scheduler.backend.name} (jitter 1 s, max_late 3 s)")
    if args.seconds is None:
        scheduler.run()
        return
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    scheduler.start()
    stop.wait(args.seconds)
    scheduler.stop()
    say(f"stopped; cache holds {CACHE or 'nothing refreshed here'}")


if __name__ == "__main__":
    main()
