"""One instance of a test cluster: ``python -m tests.cluster.worker CONFIG_JSON``.

Config keys: ``url`` (backend), ``instance``, ``log`` (JSONL file to append to),
``options`` (scheduler options), ``job`` (``kind``, ``name``, ``when``, ``options``,
``duration`` seconds, ``raise_on_abort``), ``handlers`` (handler names this instance
offers for dynamic jobs, ``add_job(handler=...)``; each logs like the job's handler, with
``duration`` 0). Every event (``change`` included) and every handler start/end is
appended to the log as one JSON line with a wall-clock ``t`` and the job's name.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from typing import Any

from anarchon import Event, RunContext, Scheduler, from_url


def main() -> None:
    config: dict[str, Any] = json.loads(sys.argv[1])
    lock = threading.Lock()
    log_file = open(config["log"], "a", buffering=1)  # noqa: SIM115 - lives as long as us

    def write(**fields: Any) -> None:
        fields.update(t=time.time(), instance=config["instance"], pid=os.getpid())
        with lock:
            log_file.write(json.dumps(fields) + "\n")

    job = config["job"]

    def handler(ctx: RunContext) -> None:
        write(kind="begin", job=ctx.name, slot=ctx.slot, attempt=ctx.attempt,
              reason=ctx.reason, params=ctx.params)
        aborted = ctx.signal.wait(job.get("duration", 0.0))
        write(kind="end", job=ctx.name, slot=ctx.slot, attempt=ctx.attempt, aborted=aborted,
              signal=ctx.signal.reason)
        if aborted and job.get("raise_on_abort", True):
            ctx.signal.raise_if_aborted()

    def dynamic(ctx: RunContext) -> None:
        write(kind="begin", job=ctx.name, slot=ctx.slot, attempt=ctx.attempt,
              reason=ctx.reason, params=ctx.params)
        write(kind="end", job=ctx.name, slot=ctx.slot, attempt=ctx.attempt, aborted=False,
              signal=None)

    scheduler = Scheduler(from_url(config["url"]), instance_id=config["instance"],
                          **config.get("options", {}))
    getattr(scheduler, job["kind"])(job["name"], job["when"], handler, **job.get("options", {}))
    for name in config.get("handlers", ()):
        scheduler.handler(name, dynamic)

    def on_event(event: Event) -> None:
        write(kind="event", type=event.type, job=event.name, slot=event.slot,
              attempt=event.attempt,
              reason=event.reason, error=repr(event.error) if event.error else None)

    for kind in ("start", "success", "failure", "interrupted", "skip", "lost", "error",
                 "change"):
        scheduler.on(kind, on_event)
    write(kind="ready")
    scheduler.run(stop_timeout=config.get("stop_timeout", 5))
    write(kind="exit")


if __name__ == "__main__":
    main()
