"""The anarchon command: read jobs and history from any store.

Examples:

  anarchon jobs --backend sqlite:///jobs.db
  anarchon history JOB --backend redis://localhost:6379?prefix=cron: [--count 20] [-v] [--json]
  anarchon purge --backend postgresql://app@db/app [--yes]
  anarchon scenarios --backend redis|valkey|postgres|sqlite [--json]

Exit status: 0 on success, 1 when the store cannot be read or the job is unknown,
2 for a usage error (a missing option, a malformed backend URL). Errors are one line on
stderr; add --traceback to see where they came from.
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

from .backends import Backend
from .clierrors import CliFailure, UsageFailure, backend_for, check_readable, report
from .engine import AsyncScheduler
from .scenarios.cli import add_parser as add_scenarios_parser
from .scenarios.cli import run as run_scenarios
from .tracebacks import summary

PROG = "anarchon"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG, description=__doc__.split("\n\n")[0].rstrip("."),
        epilog="\n\n".join(__doc__.split("\n\n")[1:]),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    store = argparse.ArgumentParser(add_help=False)
    store.add_argument("--backend", default=os.environ.get("ANARCHON_BACKEND"),
                       help="backend URL (default: $ANARCHON_BACKEND)")
    store.add_argument("--traceback", action="store_true",
                       help="print the full traceback of an error")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    jobs = commands.add_parser("jobs", parents=[store], help="list the jobs the store knows")
    jobs.add_argument("--json", action="store_true", help="print JSON")
    history = commands.add_parser("history", parents=[store],
                                  help="show a job's newest attempts from all instances")
    history.add_argument("job", help="the job's name (see: anarchon jobs)")
    history.add_argument("--count", type=int, default=20, help="how many attempts (20)")
    history.add_argument("--json", action="store_true", help="print JSON")
    history.add_argument("-v", "--verbose", action="store_true",
                         help="print each failure's stored traceback below its line")
    purge = commands.add_parser(
        "purge", parents=[store],
        help="delete every job, run and attempt of the backend's namespace",
        description="Delete every job, run, attempt and manual-run request of one namespace "
                    "(the Redis prefix, the PostgreSQL/SQLite table). Stop its instances "
                    "first. Without --yes it only lists the jobs.")
    purge.add_argument("--yes", action="store_true",
                       help="really delete (without it, only list what would go)")
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


async def _read(args: argparse.Namespace, backend: Backend) -> list[Any]:
    scheduler = AsyncScheduler(backend)
    try:
        jobs = list(await scheduler.jobs())
        if args.command == "jobs":
            return jobs
        if args.job not in {job.name for job in jobs}:
            known = ", ".join(job.name for job in jobs) or "none"
            raise CliFailure(f"unknown job {args.job!r} (jobs in this store: {known})")
        return list(await scheduler.history(args.job, args.count))
    finally:
        await scheduler.stop()


async def _purge(args: argparse.Namespace, backend: Backend) -> str:
    try:
        names = [job.name for job in await backend.known_jobs()]
        if not args.yes:
            return (f"would delete {len(names)} job(s) with their history: "
                    f"{', '.join(names) or 'none'}; add --yes to delete")
        removed = await backend.purge()
        return f"deleted {len(names)} job(s): {removed} record(s)/key(s)"
    finally:
        await backend.close()


def _print(args: argparse.Namespace, rows: list[Any]) -> None:
    if args.json:
        print(json.dumps([_plain(row) for row in rows], indent=2))
        return
    if not rows:
        print("no jobs in this store" if args.command == "jobs" else "no runs yet",
              file=sys.stderr)
    for row in rows:
        if args.command == "jobs":
            print(f"{row.name:30} {row.schedule}")
        else:
            duration = f"{row.duration:.3f}s" if row.duration is not None else "-"
            print(f"{row.started_at:%Y-%m-%d %H:%M:%S}  slot {row.scheduled_at:%H:%M:%S}  "
                  f"attempt {row.attempt}  {row.reason:9} {row.status:11} {duration:>9}  "
                  f"{row.instance_id}  {summary(row.error)}")
            if args.verbose and row.error and row.error.strip() != summary(row.error):
                print("    " + row.error.replace("\n", "\n    "))


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `anarchon` console script; returns the exit status."""
    args = _parser().parse_args(argv)
    if args.command == "scenarios":
        return run_scenarios(args)
    try:
        if not args.backend:
            raise UsageFailure("give --backend URL or set ANARCHON_BACKEND")
        if args.command == "history" and args.count < 1:
            raise UsageFailure(f"--count must be at least 1, got {args.count}")
        backend = backend_for(args.backend)
        check_readable(backend)
        if args.command == "purge":
            print(asyncio.run(_purge(args, backend)))
        else:
            _print(args, asyncio.run(_read(args, backend)))
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        return report(f"{PROG} {args.command}", exc, args.backend, args.traceback)
    return 0


if __name__ == "__main__":
    sys.exit(main())
