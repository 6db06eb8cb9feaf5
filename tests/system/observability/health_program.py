"""The program of the health tests: ``Scheduler(metrics=True)`` on the store given (lease
2 s, heartbeat 0.5 s; ``ANARCHON_LIVENESS_FILE`` if set) with one job every second,
``/metrics`` and ``/healthz`` on ``ANARCHON_METRICS_PORT``, ``run()`` until SIGTERM."""

from __future__ import annotations

import sys

from anarchon import RunContext, Scheduler, from_url
from anarchon.observability import serve_metrics


def tick(ctx: RunContext) -> None:
    """Does nothing."""


def main(url: str) -> None:
    scheduler = Scheduler(from_url(url), metrics=True, lease="2s", heartbeat="0.5s")
    scheduler.every("tick", "1s", tick)
    port = serve_metrics()
    print(f"serving /metrics on {port}", flush=True)
    scheduler.run(stop_timeout=2)


if __name__ == "__main__":
    main(sys.argv[1])
