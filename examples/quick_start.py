"""anarchon in one terminal: three instances, one SQLite file, one 4-second job.

Run ``python examples/quick_start.py``. It starts three processes that register the same
job (every 8 s, lease 3 s, heartbeat 0.5 s) and shows, in about 25 seconds:

1. one process starts each run; the other two skip it as ``taken``;
2. SIGINT to the runner: it hands the run over and another process starts it as
   ``attempt 2`` (a ``takeover``) within two heartbeats;
3. SIGKILL to the runner: nobody can hand over, so another process waits for the
   lease to expire and starts ``attempt 2`` about 3 s later.
"""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime

from anarchon import Event, RunContext, Scheduler, SqliteBackend

INTERVAL, LEASE, HEARTBEAT, WORK = 8, 3.0, 0.5, 4.0
START = re.compile(r"^\[(\w)\] .* slot (\S+) +attempt (\d) started")


def clock() -> str:
    return datetime.now().strftime("%H:%M:%S.%f")[:-3]


def instance(name: str, database: str, offset_ms: int) -> None:
    """One instance: registers the job and prints what happens to it."""
    scheduler = Scheduler(SqliteBackend(database), instance_id=name, lease=LEASE,
                          heartbeat=HEARTBEAT, jitter=0.3)

    def say(text: str) -> None:
        print(f"[{name}] {clock()}  {text}", flush=True)

    @scheduler.every("report", f"{INTERVAL}s", offset=offset_ms / 1000)
    def report(ctx: RunContext) -> None:
        if ctx.signal.wait(WORK):  # the work; returns early if aborted
            ctx.signal.raise_if_aborted()

    def slot(event: Event) -> str:
        return datetime.fromtimestamp((event.slot or 0) / 1000).strftime("%H:%M:%S")

    def on_start(event: Event) -> None:
        say(f"report slot {slot(event)}  attempt {event.attempt} started ({event.reason})")

    scheduler.on("start", on_start)
    scheduler.on("skip", lambda e: say(f"report slot {slot(e)}  skipped: {e.reason}"
                                       + (" by another instance" if e.reason == "taken" else "")))
    scheduler.on("success", lambda e: say(f"report slot {slot(e)}  attempt {e.attempt} "
                                          "succeeded"))
    scheduler.on("interrupted", lambda e: say(f"report slot {slot(e)}  attempt {e.attempt} "
                                              f"interrupted ({e.reason}): handed over"))
    say("up: waiting for the next slot")
    scheduler.run()
    say("stopped")


class Demo:
    """Starts the three instances and plays the three situations."""

    def __init__(self) -> None:
        self.folder = tempfile.mkdtemp(prefix="anarchon-quick-start-")
        self.database = os.path.join(self.folder, "jobs.db")
        now_ms = int(time.time() * 1000)
        self.offset_ms = (now_ms + 3000) % (INTERVAL * 1000)  # first slot in ~3 s
        self.lines: queue.Queue[tuple[float, str]] = queue.Queue()
        self.procs: dict[str, subprocess.Popen[str]] = {}

    def spawn(self, name: str) -> None:
        proc = subprocess.Popen(
            [sys.executable, __file__, "--instance", name, self.database, str(self.offset_ms)],
            stdout=subprocess.PIPE, text=True, bufsize=1,
        )
        self.procs[name] = proc
        threading.Thread(target=self._pump, args=(proc,), daemon=True).start()

    def _pump(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            self.lines.put((time.monotonic(), line.rstrip()))

    def until(self, pattern: str, timeout: float = 20) -> tuple[float, re.Match[str]]:
        """Print instance output until a line matches ``pattern``."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                at, line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                message = f"quick start: nothing matched {pattern!r} in {timeout}s"
                raise SystemExit(message) from None
            print(line, flush=True)
            match = re.search(pattern, line)
            if match:
                return at, match

    def narrate(self, text: str) -> None:
        print(f"\n=== {text}\n", flush=True)

    def run(self) -> None:
        print(f"SQLite file: {self.database}")
        self.narrate("1. three instances, one job: one runs it, the others skip it as taken")
        for name in "ABC":
            self.spawn(name)
        self.until(START.pattern)
        self.until(r"succeeded")

        self.narrate("2. SIGINT to the runner of the next slot: graceful stop, hand-over")
        _, runner = self.until(START.pattern)
        time.sleep(1.0)
        sent = time.monotonic()
        print(f"--> {clock()}  sending SIGINT to {runner[1]}", flush=True)
        self.procs[runner[1]].send_signal(signal.SIGINT)
        at, taker = self.until(r"attempt 2 started \(takeover\)")
        print(f"--> attempt 2 started by {taker.string[1]} {at - sent:.2f} s after SIGINT "
              f"(heartbeat {HEARTBEAT} s)", flush=True)
        self.until(r"attempt 2 succeeded")

        self.narrate("3. SIGKILL to the runner of the next slot: the lease must expire first")
        _, runner = self.until(START.pattern)
        time.sleep(1.0)
        sent = time.monotonic()
        print(f"--> {clock()}  sending SIGKILL to {runner[1]}", flush=True)
        self.procs[runner[1]].kill()
        at, taker = self.until(r"attempt 2 started \(takeover\)")
        print(f"--> attempt 2 started by {taker.string[1]} {at - sent:.2f} s after SIGKILL "
              f"(lease {LEASE} s)", flush=True)
        self.until(r"attempt 2 succeeded")
        self.narrate("done: every slot ran once; history is in the SQLite file above")

    def close(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
        for proc in self.procs.values():
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()


def main() -> None:
    if len(sys.argv) == 5 and sys.argv[1] == "--instance":
        instance(sys.argv[2], sys.argv[3], int(sys.argv[4]))
        return
    demo = Demo()
    try:
        demo.run()
    finally:
        demo.close()


if __name__ == "__main__":
    main()
