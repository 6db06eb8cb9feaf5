"""A program for test_logs: ``logging.basicConfig(level=INFO)``, no listener, a job that
fails, one that overlaps itself; JSON lines of anarchon's records on stdout, the plain
log on stderr. Exits once the persisting-skips WARNING was logged (or after 30 s)."""

from __future__ import annotations

import json
import logging
import sys
import threading
import time

from anarchon import RunContext, Scheduler
from anarchon.backends.sqlite import SqliteBackend

FIELDS = ("anarchon_job", "anarchon_slot", "anarchon_attempt", "anarchon_instance")
persisted = threading.Event()


class Lines(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        line = {"logger": record.name, "level": record.levelname,
                "message": record.getMessage(), "traceback": bool(record.exc_info)}
        line.update({key: getattr(record, key) for key in FIELDS})
        print(json.dumps(line), flush=True)
        if record.name == "anarchon.skips" and record.levelno == logging.WARNING:
            persisted.set()


def main(database: str) -> None:
    logging.basicConfig(level=logging.INFO)
    logging.getLogger("anarchon").addHandler(Lines())
    scheduler = Scheduler(backend=SqliteBackend(database=database), instance_id="logs-1")

    @scheduler.every("boom", "1s")
    def boom(ctx: RunContext) -> None:
        raise ValueError("kaput")

    @scheduler.every("slow", "1s")
    def slow(ctx: RunContext) -> None:
        ctx.signal.wait(30)  # overlaps its next slots until the scheduler stops

    with scheduler:
        persisted.wait(30)
        time.sleep(0.2)


if __name__ == "__main__":
    main(sys.argv[1])
