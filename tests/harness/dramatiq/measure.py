"""Measure by hand what the issue asks (not collected by pytest)::

    python -m tests.harness.dramatiq.measure slots --broker redis --seconds 60
    python -m tests.harness.dramatiq.measure crash --runs 5
    python -m tests.harness.dramatiq.measure slots --no-middleware --queue-lease 2

``slots``: 3 ``anarchon-dramatiq`` processes and one worker, an every-1s tracked job:
messages per slot, lost slots, executions per slot, successes in history.
``--no-middleware``: the worker's broker lacks ``AnarchonMiddleware`` (and
``--queue-lease`` sets the schedulers' ``--queue-lease``).
``crash``: tracked one-off job, the worker running it is killed with SIGKILL; prints the
delay from the kill to the backup scheduler's re-send of attempt 2 (Redis broker).
Needs Redis (store and broker) and, for ``--broker rabbitmq``, RabbitMQ.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

from anarchon import Scheduler, from_url
from tests.harness.dramatiq.fixtures import _cleanup
from tests.harness.dramatiq.rig import HEARTBEAT, LEASE, Rig, first
from tests.stores.redis import STORE


def _rig(broker: str, scenario: str, at_lead: float | None = None,
         **options: Any) -> tuple[Rig, str]:
    namespace = "adt_" + uuid.uuid4().hex[:10]
    tmp = Path(tempfile.mkdtemp(prefix=f"adt-{scenario}-"))
    return Rig(tmp, broker, namespace, STORE.url_for(namespace), scenario, at_lead,
               **options), namespace


def slots(broker: str, seconds: float, middleware: bool = True,
          queue_lease: float | None = None) -> dict[str, Any]:
    rig, namespace = _rig(broker, "count", middleware=middleware, queue_lease=queue_lease)
    try:
        rig.workers("w1")
        rig.schedulers("s0", "s1", "s2")
        time.sleep(seconds)
        rig.stop("s0", "s1", "s2")
        sent = rig.records("sent")
        per_slot = Counter(r["slot"] for r in sent)
        rig.wait_for(lambda lines: {r["slot"] for r in lines if r["kind"] == "end"}
                     >= set(per_slot), 30, "the worker to drain the queue")
        time.sleep(1)  # let the last message's duplicates (if any) be executed too
        ordered = sorted(per_slot)
        expected = set(range(ordered[0], ordered[-1] + 1000, 1000))
        runs = Counter(r["slot"] for r in rig.records("begin"))
        reader = Scheduler(from_url(rig.store))
        records = {r.slot: r for r in reader.history("tick", max(100, len(ordered) + 10))
                   if r.status != "skipped"}
        reader.close()
        return dict(broker=broker, seconds=seconds, schedulers=3, middleware=middleware,
                    queue_lease=queue_lease, slots=len(ordered),
                    messages=len(sent),
                    messages_per_slot=dict(Counter(per_slot.values())),
                    slots_lost=len(expected - set(ordered)),
                    executions_per_slot=dict(Counter(runs.values())),
                    success_in_history=sum(1 for s in ordered if s in records
                                           and records[s].status == "success"),
                    sends_per_scheduler=sorted(Counter(r["pid"] for r in sent).values()))
    finally:
        rig.stop()
        _cleanup(broker, namespace)


def crash(runs: int) -> dict[str, Any]:
    delays: list[float] = []
    for _ in range(runs):
        rig, namespace = _rig("redis", "crash", at_lead=3)
        try:
            rig.workers("w1", "w2")
            rig.schedulers("s0", "s1", "s2")
            began = rig.wait_for(first("begin", attempt=1), 20, "attempt 1")
            time.sleep(HEARTBEAT * 2)
            killed = rig.kill(rig.name_of(began["pid"]))
            resent = rig.wait_for(first("sent", attempt=2), 20, "attempt 2")
            rig.wait_for(first("end", attempt=2), 20, "attempt 2 processed")
            delays.append(round(resent["t"] - killed, 3))
        finally:
            rig.stop()
            _cleanup("redis", namespace)
    return dict(lease=LEASE, heartbeat=HEARTBEAT, resend_delays=delays, min=min(delays),
                max=max(delays), mean=round(sum(delays) / len(delays), 3))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("what", choices=["slots", "crash"])
    parser.add_argument("--broker", choices=["redis", "rabbitmq"], default="redis")
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--no-middleware", action="store_true")
    parser.add_argument("--queue-lease", type=float)
    args = parser.parse_args()
    result = (slots(args.broker, args.seconds, not args.no_middleware, args.queue_lease)
              if args.what == "slots" else crash(args.runs))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
