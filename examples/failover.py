"""Failover on any lease store: a frozen runner loses its run to a backup, then notices.

    python examples/failover.py                                    # SQLite in the temp folder
    python examples/failover.py --backend redis://localhost:6379?prefix=failover:
    python examples/failover.py --backend postgresql://postgres@localhost/test
    python examples/failover.py --seconds 40                       # give up after 40 s

It starts two instances (this file with ``--instance``) of a 5-second job, lease 2 s,
heartbeat 0.5 s, and then:

1. one instance starts the slot (``attempt 1``), the other skips it as ``taken``;
2. the runner is **frozen** with SIGSTOP (a GC pause, a stuck VM, a laptop lid) for longer
   than the lease: its heartbeats stop, the lease expires, and the backup starts the same
   slot as ``attempt 2`` (reason ``takeover``);
3. the frozen runner is resumed with SIGCONT: its next renew is refused, so its
   ``ctx.signal`` aborts (reason ``lost``), a ``lost`` event fires, and its finish is
   refused by the store — the slot is recorded as a success once, by attempt 2.

Between the takeover and the moment the frozen runner wakes, both copies of the handler
existed: that brief overlap is why handlers key their writes by ``ctx.slot`` and pass
``(ctx.slot, ctx.attempt)`` downstream as a fencing token.
"""

from __future__ import annotations

import argparse
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

from anarchon import Event, RunContext, Scheduler, from_url

LEASE, HEARTBEAT, WORK, EVERY = 2.0, 0.5, 5.0, 8


def now() -> str:
    return f"{datetime.now():%H:%M:%S.%f}"[:-3]


def instance(name: str, url: str) -> None:
    """One instance: the job, and a line for each event."""
    scheduler = Scheduler(from_url(url), instance_id=name, lease=LEASE, heartbeat=HEARTBEAT,
                          jitter="200ms", catch_up=0)

    def say(text: str) -> None:
        print(f"[{name}] {now()}  {text}", flush=True)

    @scheduler.every("failover-demo", EVERY)
    def work(ctx: RunContext) -> None:
        if ctx.signal.wait(WORK):
            say(f"handler sees its signal aborted (reason {ctx.signal.reason}) "
                f"in attempt {ctx.attempt}")
            ctx.signal.raise_if_aborted()

    def on_event(event: Event) -> None:
        detail = {"start": f"attempt {event.attempt} started ({event.reason})",
                  "success": f"attempt {event.attempt} succeeded",
                  "skip": f"skipped ({event.reason})",
                  "interrupted": f"attempt {event.attempt} interrupted ({event.reason})",
                  "lost": f"attempt {event.attempt} lost: a backup took over",
                  "failure": f"attempt {event.attempt} failed: {event.error}",
                  "error": f"store error: {event.error}"}[event.type]
        say(f"slot {datetime.fromtimestamp((event.slot or 0) / 1000):%H:%M:%S}  {detail}")

    for kind in ("start", "success", "skip", "interrupted", "lost", "failure", "error"):
        scheduler.on(kind, on_event)
    say(f"up on {scheduler.backend.name}")
    scheduler.run()
    say("stopped")


def ignore_sigint() -> None:
    """In a child before exec: start with SIGINT ignored (Python keeps it so)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


class Demo:
    """Runs two instances and plays the freeze."""

    def __init__(self, url: str, deadline: float) -> None:
        self.url = url
        self.deadline = deadline
        self.lines: queue.Queue[str] = queue.Queue()
        self.procs: dict[str, subprocess.Popen[str]] = {}

    def spawn(self, name: str) -> None:
        # SIGINT ignored until the instance's scheduler.run() handles it: a Ctrl+C while
        # it is still importing must not print a KeyboardInterrupt traceback
        proc = subprocess.Popen([sys.executable, __file__, "--instance", name,
                                 "--backend", self.url], stdout=subprocess.PIPE, text=True,
                                preexec_fn=ignore_sigint)
        self.procs[name] = proc
        threading.Thread(target=self._pump, args=(proc,), daemon=True).start()

    def _pump(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            self.lines.put(line.rstrip())

    def until(self, pattern: str) -> re.Match[str]:
        """Echo instance output until a line matches ``pattern``."""
        while True:
            try:
                line = self.lines.get(timeout=max(0.0, self.deadline - time.monotonic()))
            except queue.Empty:
                raise SystemExit(f"failover demo: timed out waiting for {pattern!r}") from None
            print(line, flush=True)
            match = re.search(pattern, line)
            if match:
                return match

    def run(self) -> None:
        print(f"=== 1. two instances, lease {LEASE:g} s, heartbeat {HEARTBEAT:g} s, "
              f"a {WORK:g}-second job every {EVERY} s", flush=True)
        for name in ("A", "B"):
            self.spawn(name)
        runner = self.until(r"^\[(\w)\] .*attempt 1 started")[1]
        time.sleep(0.5)
        print(f"=== 2. {now()}  freezing {runner} (SIGSTOP) for longer than its {LEASE:g} s lease",
              flush=True)
        self.procs[runner].send_signal(signal.SIGSTOP)
        self.until(r"attempt 2 started \(takeover\)")
        time.sleep(1.0)  # both "own" the slot now: the frozen one does not know yet
        print(f"=== 3. {now()}  resuming {runner} (SIGCONT): it must notice it lost the run",
              flush=True)
        self.procs[runner].send_signal(signal.SIGCONT)
        self.until(rf"^\[{runner}\] .*lost: a backup took over")
        self.until(r"attempt 2 succeeded")
        print("=== done: one success for the slot (attempt 2); the frozen attempt 1 was "
              "aborted and its finish refused", flush=True)

    def close(self) -> None:
        """Stop the instances: SIGINT until they exit (one still importing ignores it)."""
        deadline = time.monotonic() + 15
        alive = list(self.procs.values())
        while alive and time.monotonic() < deadline:
            for proc in alive:
                proc.send_signal(signal.SIGCONT)
                proc.send_signal(signal.SIGINT)
            time.sleep(0.5)
            alive = [proc for proc in alive if proc.poll() is None]
        for proc in alive:
            proc.kill()
            proc.wait()
        while not self.lines.empty():
            print(self.lines.get(), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else "")
    parser.add_argument("--backend", default=os.environ.get("ANARCHON_BACKEND"),
                        help="a lease store URL (default: a SQLite file in a temporary "
                             "folder, removed at the end)")
    parser.add_argument("--seconds", type=float, default=60.0,
                        help="give up if the demo has not finished after this long")
    parser.add_argument("--instance", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.instance:
        instance(args.instance, args.backend)
        return
    with tempfile.TemporaryDirectory(prefix="anarchon-failover-") as folder:
        url = args.backend or "sqlite:///" + os.path.join(folder, "failover.db")
        demo = Demo(url, time.monotonic() + args.seconds)
        try:
            demo.run()
        except KeyboardInterrupt:
            print("=== interrupted: stopping the instances", flush=True)
        finally:
            demo.close()


if __name__ == "__main__":
    main()
