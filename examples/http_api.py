"""Run history over HTTP, served by a process that registers no jobs (stdlib only).

    python examples/http_api.py --demo                 # API + a worker producing history
    python examples/http_api.py --backend redis://localhost:6379?prefix=cron:
    python examples/http_api.py --demo --seconds 10    # exit by itself

Then::

    curl localhost:8000/jobs                      # every job the store knows
    curl localhost:8000/jobs/tick/history?count=5 # newest-first attempts, all instances
    curl localhost:8000/jobs/tick/last            # the newest attempt

The API process builds a ``Scheduler`` on the same store as the instances but never
starts it and registers no jobs: ``history()``, ``last_run()`` and ``jobs()`` connect on
demand and read what every instance recorded. ``--demo`` also starts one worker process
(this file with ``--worker``) running a job ``tick`` every 2 s, so there is something to
read. Store: ``--backend URL`` or ``$ANARCHON_BACKEND`` (default: a SQLite file in the
temp folder). ``--port 0`` picks a free port; the address is printed on start.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from anarchon import JobNotFoundError, RunContext, Scheduler, from_url


def plain(value: Any) -> Any:
    """Dataclasses and datetimes as JSON-ready values."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {key: plain(item) for key, item in dataclasses.asdict(value).items()}
    if isinstance(value, dict):
        return {key: plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(item) for item in value]
    if isinstance(value, datetime):
        return value.isoformat()
    return value


def make_handler(reader: Scheduler) -> type[BaseHTTPRequestHandler]:
    """A request handler answering from ``reader`` (a scheduler that is never started)."""

    class HistoryAPI(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            url = urlsplit(self.path)
            parts = [unquote(part) for part in url.path.strip("/").split("/") if part]
            query = parse_qs(url.query)
            try:
                if parts == ["jobs"]:
                    self.reply(200, plain(reader.jobs()))
                elif len(parts) == 3 and parts[0] == "jobs" and parts[2] == "history":
                    count = int(query.get("count", ["20"])[0])
                    self.reply(200, plain(reader.history(parts[1], count)))
                elif len(parts) == 3 and parts[0] == "jobs" and parts[2] == "last":
                    self.reply(200, plain(reader.last_run(parts[1])))
                else:
                    self.reply(404, {"error": "try /jobs, /jobs/NAME/history or "
                                              "/jobs/NAME/last"})
            except (ValueError, JobNotFoundError) as exc:
                self.reply(400, {"error": str(exc)})

        def reply(self, status: int, body: Any) -> None:
            data = json.dumps(body, indent=2).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            print(f"http: {format % args}", flush=True)

    return HistoryAPI


def worker(url: str) -> None:
    """A job-running instance (``--demo`` starts one), so history has entries."""
    scheduler = Scheduler(from_url(url), jitter="200ms")

    @scheduler.every("tick", "2s")
    def tick(ctx: RunContext) -> None:
        print(f"worker: tick for slot {ctx.scheduled_at:%H:%M:%S}", flush=True)

    scheduler.run()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else "")
    parser.add_argument("--backend", default=os.environ.get("ANARCHON_BACKEND") or
                        f"sqlite:///{os.path.join(tempfile.gettempdir(), 'anarchon-http.db')}")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--seconds", type=float, default=None,
                        help="stop by itself after this many seconds")
    parser.add_argument("--demo", action="store_true", help="also start a worker process")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.backend)
        return

    reader = Scheduler(from_url(args.backend))  # no jobs, never started
    reader.jobs()  # connect once before serving from many threads
    server = ThreadingHTTPServer((args.host, args.port), make_handler(reader))
    child = None
    if args.demo:
        child = subprocess.Popen([sys.executable, __file__, "--worker", "--backend",
                                  args.backend])
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    threading.Thread(target=server.serve_forever, daemon=True).start()
    host, port = str(server.server_address[0]), server.server_address[1]
    print(f"serving history on http://{host}:{port}/jobs (Ctrl+C to stop)", flush=True)
    try:
        stop.wait(args.seconds)
    finally:
        server.shutdown()
        server.server_close()
        if child is not None:
            child.send_signal(signal.SIGINT)
            child.wait(30)
        reader.close()
    print("stopped", flush=True)


if __name__ == "__main__":
    main()
