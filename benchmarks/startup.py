"""Start-up with many registered cron jobs: ``python -m benchmarks.startup``.

One ``AsyncScheduler`` on a fresh SQLite file (or ``--backend URL``) registers ``--jobs``
cron jobs drawn from ``--expressions`` distinct expressions (daily at a minute of its
own, tenants-style) across a few time zones, then ``start()``s. Prints the time to
register and to start, as one JSON line; ``--profile N`` also prints the top ``N``
functions of a cProfile of both (cumulative time).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import json
import pstats
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from anarchon import AsyncScheduler, RunContext, from_url

ZONES = ("UTC", "Europe/Paris", "America/New_York", "Asia/Tokyo")


def expression(k: int) -> str:
    """The ``k``-th distinct daily cron expression (minute and hour of its own)."""
    return f"{k % 60} {(k // 60) % 24} * * *"


async def measure(jobs: int, expressions: int, url: str) -> dict[str, Any]:
    async def handler(ctx: RunContext) -> None:  # never due in the measurement
        pass

    scheduler = AsyncScheduler(from_url(url), instance_id="startup")
    began = time.perf_counter()
    for i in range(jobs):
        k = i % expressions
        scheduler.cron(f"tenant-{i}", expression(k), handler, timezone=ZONES[k % len(ZONES)])
    registered = time.perf_counter()
    await scheduler.start()
    started = time.perf_counter()
    await scheduler.stop()
    return {"jobs": jobs, "expressions": expressions,
            "register_s": round(registered - began, 2),
            "start_s": round(started - registered, 2),
            "total_s": round(started - began, 2)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.startup", description=__doc__)
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--expressions", type=int, default=300)
    parser.add_argument("--backend", help="store URL (default: a fresh SQLite file)")
    parser.add_argument("--profile", type=int, default=0, metavar="N",
                        help="print the top N functions of a cProfile")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        url = args.backend or f"sqlite:///{Path(tmp) / 'startup.db'}"
        profile = cProfile.Profile() if args.profile else None
        if profile is not None:
            profile.enable()
        result = asyncio.run(measure(args.jobs, args.expressions, url))
        if profile is not None:
            profile.disable()
            out = io.StringIO()
            pstats.Stats(profile, stream=out).sort_stats("cumulative").print_stats(args.profile)
            print(out.getvalue(), file=sys.stderr)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
