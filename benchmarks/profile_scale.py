"""Where one instance's time goes in a scale row: a py-spy profile of one member.

``python -m benchmarks.profile_scale STORE [--jobs 1000] [--seconds 20]`` runs one
``scale`` row (3 instance processes, jobs every 1 s, jitter 0.5 s) and records the first
member with ``py-spy record --nonblocking`` (the process is sampled, not paused) for the
middle of the window. It prints the row's result and, from the raw (collapsed) stacks,
the share of samples under each of a few frames (inclusive) and the top own-time frames.
Needs ``py-spy`` (``pip install py-spy``; not a dependency of the project) and ptrace
permission (root, or ``kernel.yama.ptrace_scope=0``).

``python -m benchmarks.profile_scale --raw FILE [--frame TEXT ...]`` summarises any raw
py-spy file the same way (e.g. of ``py-spy record -f raw --subprocesses -- python -m
benchmarks.claims …``), with the inclusive share of each ``--frame`` too.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

from . import scale

#: frames whose inclusive share is reported (substring of py-spy's "function (file)")
WATCHED = {
    "claim (claims + store)": "claim_together",
    "finish (store)": "finish_many",
    "handler runs (attempt bookkeeping)": "_perform",
    "planner": "_plan_loop",
    "heartbeat": "heartbeat",
    "event loop select": "select (selectors.py",
    "socket writes": "write (asyncio/selector_events.py",
    "redis-py": "redis/",
    "psycopg": "psycopg/",
    "SQLite store thread": "anarchon/backends/sqlite/",
    "Django ORM": "django/db/",
}

URL_VARS = {"redis": "ANARCHON_REDIS_URL", "valkey": "ANARCHON_VALKEY_URL",
            "postgres": "ANARCHON_POSTGRES_URL"}


def _members() -> list[int]:
    out = subprocess.run(["pgrep", "-f", "benchmarks.member"], capture_output=True,
                         text=True, check=False).stdout
    return sorted(int(pid) for pid in out.split())


def shares(raw: str) -> tuple[int, dict[str, float], list[tuple[str, float]]]:
    """Total samples, the watched frames' inclusive shares, the top own-time frames."""
    total = 0
    inclusive: Counter[str] = Counter()
    own: Counter[str] = Counter()
    for line in raw.splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        total += count
        frames = stack.split(";")
        for label, needle in WATCHED.items():
            if any(needle in frame for frame in frames):
                inclusive[label] += count
        own[frames[-1].rsplit(":", 1)[0] + ")"] += count
    scaled = {label: 100 * inclusive[label] / total for label in WATCHED} if total else {}
    top = [(frame, 100 * n / total) for frame, n in own.most_common(10)] if total else []
    return total, scaled, top


def _print_shares(raw: str, extra: list[str]) -> None:
    for text in extra:
        WATCHED[text] = text
    total, inclusive, top = shares(raw)
    print(f"{total} samples:")
    for label, share in sorted(inclusive.items(), key=lambda item: -item[1]):
        if share:
            print(f"  {share:5.1f} %  {label}")
    print("top own time:")
    for frame, share in top:
        print(f"  {share:5.1f} %  {frame}")


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.profile_scale")
    parser.add_argument("--raw", type=Path, help="only summarise this raw py-spy file")
    parser.add_argument("--frame", action="append", default=[],
                        help="also report the inclusive share of frames containing this")
    parser.add_argument("store", nargs="?", choices=["redis", "valkey", "postgres", "sqlite",
                                          "django-postgres", "django-sqlite",
                                          "django-mariadb"])
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--rate", type=int, default=200, help="py-spy samples per second")
    args = parser.parse_args()
    if args.raw is not None:
        _print_shares(args.raw.read_text(), args.frame)
        return
    if args.store is None:
        parser.error("give a store, or --raw FILE")
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    base = os.environ.get(URL_VARS.get(args.store, ""), "")
    if args.store.startswith("django-"):
        base = ""
    workdir = Path(tempfile.mkdtemp(prefix="anarchon-profile-"))
    result: dict[str, object] = {}

    def row() -> None:
        result.update(scale.scale(args.store, base or None, workdir, args.jobs, args.seconds))

    runner = threading.Thread(target=row)
    runner.start()
    deadline = time.monotonic() + 60
    while len(_members()) < 3 and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(min(5.0, args.seconds / 4))  # past start-up and registration
    raw_path = workdir / "profile.txt"
    pid = _members()[0]
    subprocess.run([spy, "record", "--pid", str(pid), "--nonblocking", "-r", str(args.rate),
                    "-d", str(int(args.seconds / 2)), "-f", "raw", "-o", str(raw_path)],
                   check=True, capture_output=True)
    runner.join()
    print(json.dumps({k: result.get(k) for k in (
        "backend", "jobs", "started", "expected", "delay_after_slot_jitter", "cpu_pct_max",
        "given_up_late", "given_up_overlap")}, default=str))
    print(f"profile of one instance (pid {pid}) at {args.rate}/s: ", end="")
    _print_shares(raw_path.read_text(), args.frame)
    print(f"raw stacks: {raw_path}")


if __name__ == "__main__":
    main()
