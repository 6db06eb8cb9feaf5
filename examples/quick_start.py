"""anarchon in one terminal: three instances, one SQLite file, one 4-second job.

Run ``python examples/quick_start.py`` (``--backend URL`` for another lease store than a
temporary SQLite file, ``--seconds N`` to stop after N seconds). It starts three processes
that register the same job (every 8 s, lease 3 s, heartbeat 0.5 s) and shows, in about 25
seconds:

1. one process starts each run; the other two skip it as ``taken``;
2. SIGINT to the runner: it hands the run over and another process starts it as
   ``attempt 2`` (a ``takeover``) within two heartbeats;
3. SIGKILL to the runner: nobody can hand over, so another process waits for the
   lease to expire and starts ``attempt 2`` about 3 s later.
"""

from __future__ import annotations

import argparse
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime

from anarchon import Event, RunContext, Scheduler, from_url

INTERVAL, LEASE, HEARTBEAT, WORK = 8, 3.0, 0.5, 4.0
START = re.compile(r"^\[(\w)\] .* slot (\S+) +attempt (\d) started")


def clock() -> str:
    return datetime.now().strftime("%H:%M:%S.%f")[:-3]


class TimeUp(Exception):
    """``--seconds`` ran out before the demo's end."""


def instance(name: str, url: str, offset_ms: int) -> None:
    """One instance: registers the job and prints what happens to it."""
    scheduler = Scheduler(from_url(url), instance_id=name, lease=LEASE,
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


def ignore_sigint() -> None:
    """In a child before exec: start with SIGINT ignored (Python keeps it so)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


class Demo:
    """Starts the three instances and plays the three situations."""

    def __init__(self, url: str | None, seconds: float | None) -> None:
        self.folder: str | None = None
        if url is None:
            self.folder = tempfile.mkdtemp(prefix="anarchon-quick-start-")
            url = "sqlite:///" + os.path.join(self.folder, "jobs.db")
        self.url = url
        self.end = time.monotonic() + seconds if seconds is not None else float("inf")
        now_ms = int(time.time() * 1000)
        self.offset_ms = (now_ms + 3000) % (INTERVAL * 1000)  # first slot in ~3 s
        self.lines: queue.Queue[tuple[float, str]] = queue.Queue()
        self.procs: dict[str, subprocess.Popen[str]] = {}

    def spawn(self, name: str) -> None:
        proc = subprocess.Popen(
            [sys.executable, __file__, "--instance", name, self.url, str(self.offset_ms)],
            stdout=subprocess.PIPE, text=True, bufsize=1,
            # SIGINT ignored until the instance's scheduler.run() handles it: a Ctrl+C
            # while it is still importing must not print a KeyboardInterrupt traceback
            preexec_fn=ignore_sigint,
        )
        self.procs[name] = proc
        threading.Thread(target=self._pump, args=(proc,), daemon=True).start()

    def _pump(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            self.lines.put((time.monotonic(), line.rstrip()))

    def until(self, pattern: str, timeout: float = 20) -> tuple[float, re.Match[str]]:
        """Print instance output until a line matches ``pattern``."""
        deadline = min(time.monotonic() + timeout, self.end)
        while True:
            try:
                at, line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                if deadline == self.end:
                    raise TimeUp from None
                message = f"quick start: nothing matched {pattern!r} in {timeout}s"
                raise SystemExit(message) from None
            print(line, flush=True)
            match = re.search(pattern, line)
            if match:
                return at, match

    def narrate(self, text: str) -> None:
        print(f"\n=== {text}\n", flush=True)

    def run(self) -> None:
        print(f"store: {self.url}")
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
        self.narrate("done: every slot ran once")

    def close(self) -> None:
        """Stop the instances: SIGINT until they exit (one still importing ignores it)."""
        deadline = time.monotonic() + 15
        alive = list(self.procs.values())
        while alive and time.monotonic() < deadline:
            for proc in alive:
                proc.send_signal(signal.SIGINT)
            time.sleep(0.5)
            alive = [proc for proc in alive if proc.poll() is None]
        for proc in alive:
            proc.kill()
            proc.wait()
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)


def main() -> None:
    if len(sys.argv) == 5 and sys.argv[1] == "--instance":
        instance(sys.argv[2], sys.argv[3], int(sys.argv[4]))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else "")
    parser.add_argument("--backend", default=os.environ.get("ANARCHON_BACKEND"),
                        help="a lease store URL (default: a SQLite file in a temporary folder, "
                             "removed at the end)")
    parser.add_argument("--seconds", type=float, default=None,
                        help="stop after this many seconds, even mid-demo")
    args = parser.parse_args()
    demo = Demo(args.backend, args.seconds)
    try:
        demo.run()
    except TimeUp:
        print(f"\n=== stopped after {args.seconds:g} s (--seconds)", flush=True)
    except KeyboardInterrupt:
        print("\n=== interrupted: stopping the instances", flush=True)
    finally:
        demo.close()


if __name__ == "__main__":
    main()
