"""The program of the takeover scrape test: ``Scheduler(metrics=True)`` on the store given
(lease 2 s, heartbeat 0.5 s), one-off job ``hold`` at the epoch second given (every
instance up by then claims it: one runs it, the others watch it) whose run lasts until
the scheduler stops and marks itself with the file ``<MARKERS>/<pid>`` while it runs;
``/metrics`` on ``ANARCHON_METRICS_PORT``."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from anarchon import RunContext, Scheduler, from_url
from anarchon.observability import serve_metrics


def hold(ctx: RunContext) -> None:
    marker = Path(os.environ["MARKERS"]) / str(os.getpid())
    marker.write_text(ctx.instance_id)
    try:
        ctx.signal.wait(120)
    finally:
        marker.unlink(missing_ok=True)


def main(url: str, when: str) -> None:
    scheduler = Scheduler(from_url(url), metrics=True, lease="2s", heartbeat="0.5s")
    scheduler.at("hold", int(when), hold)
    print(f"serving /metrics on {serve_metrics()}", flush=True)
    scheduler.run(stop_timeout=2)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
