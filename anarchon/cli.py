"""The ``anarchon`` command: read history and jobs from any store.

    anarchon jobs --backend sqlite:///jobs.db
    anarchon history JOB --backend redis://localhost:6379 [--count 20] [--json]
    anarchon scenarios --backend redis|valkey|postgres|sqlite [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import sys
from collections.abc import Sequence
from typing import Any

from .backends import from_url
from .engine import AsyncScheduler
from .scenarios.cli import add_parser as add_scenarios_parser
from .scenarios.cli import run as run_scenarios


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="anarchon", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    for name, text in (("jobs", "list the jobs the store knows"),
                       ("history", "show a job's newest attempts from all instances")):
        sub = commands.add_parser(name, help=text)
        sub.add_argument("--backend", default=os.environ.get("ANARCHON_BACKEND"),
                         help="backend URL (default: $ANARCHON_BACKEND)")
        sub.add_argument("--json", action="store_true", help="print JSON")
        if name == "history":
            sub.add_argument("job")
            sub.add_argument("--count", type=int, default=20)
    add_scenarios_parser(commands)
    return parser


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {k: _plain(v) for k, v in dataclasses.asdict(value).items()}
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return value


async def _run(args: argparse.Namespace) -> list[Any]:
    scheduler = AsyncScheduler(from_url(args.backend))
    try:
        if args.command == "jobs":
            return list(await scheduler.jobs())
        return list(await scheduler.history(args.job, args.count))
    finally:
        await scheduler.stop()


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``anarchon`` console script."""
    args = _parser().parse_args(argv)
    if args.command == "scenarios":
        return run_scenarios(args)
    if not args.backend:
        print("anarchon: give --backend URL or set ANARCHON_BACKEND", file=sys.stderr)
        return 2
    rows = asyncio.run(_run(args))
    if args.json:
        print(json.dumps([_plain(row) for row in rows], indent=2))
        return 0
    for row in rows:
        if args.command == "jobs":
            print(f"{row.name:30} {row.schedule}")
        else:
            duration = f"{row.duration:.3f}s" if row.duration is not None else "-"
            print(f"{row.started_at:%Y-%m-%d %H:%M:%S}  slot {row.scheduled_at:%H:%M:%S}  "
                  f"attempt {row.attempt}  {row.reason:9} {row.status:11} {duration:>9}  "
                  f"{row.instance_id}  {row.error or ''}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
