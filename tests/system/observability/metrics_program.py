"""The plain entry point of the metrics test: ``Scheduler(metrics=True)`` on the store
given, ``serve_metrics()`` on ``ANARCHON_METRICS_PORT``, ``run()`` until SIGTERM."""

from __future__ import annotations

import sys

from anarchon import Scheduler, from_url
from anarchon.observability import serve_metrics
from tests.system.observability.metrics_jobs import register


def main(url: str) -> None:
    scheduler = Scheduler(from_url(url), metrics=True, lease="3s", heartbeat="0.5s")
    register(scheduler)
    port = serve_metrics()
    print(f"serving /metrics on {port}", flush=True)
    scheduler.run(stop_timeout=2)


if __name__ == "__main__":
    main(sys.argv[1])
