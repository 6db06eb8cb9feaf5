"""A Dramatiq worker process for the broker tests: ``python -m ...worker_proc``.

Runs the app's actors with one worker thread until SIGTERM; logs ``ready``.
"""

from __future__ import annotations

import signal
import threading

from dramatiq import Worker

from tests.harness.dramatiq import app


def main() -> None:
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    app.broker.emit_after("process_boot")
    worker = Worker(app.broker, worker_threads=1, worker_timeout=100)
    worker.start()
    app.log(kind="ready")
    stop.wait()
    worker.stop(timeout=5000)
    app.broker.close()
    app.log(kind="exit")


if __name__ == "__main__":
    main()
