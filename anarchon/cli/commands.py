"""The anarchon command: read jobs and history from any store, and control jobs at runtime.

Examples:

  anarchon jobs --backend sqlite:///jobs.db [--json]
  anarchon history JOB --backend redis://localhost:6379?prefix=cron: [--count 20] [-v] [--json]
  anarchon pause JOB [--by TEXT]    /    anarchon resume JOB [--by TEXT]
  anarchon reschedule JOB --every 5m [--offset 10s] | --cron "0 3 * * *" [--timezone TZ] | --reset
  anarchon add JOB --handler NAME (--every D | --cron EXPR [--timezone TZ] | --at ISO)
               [--params JSON] [--option key=value ...] [--replace]
  anarchon remove JOB
  anarchon changes JOB [--count 20] [--json]
  anarchon forget JOB [--yes]
  anarchon purge --backend postgresql://app@db/app [--yes]
  anarchon schema --backend postgresql://app@db/app?table=jobs.runs
  anarchon status --backend redis://localhost:6379 [--json]
  anarchon health --backend URL --instance ID | --pid-file PATH
  anarchon doctor --backend URL [--json]
  anarchon scenarios --backend redis|valkey|postgres|sqlite [--json]

The store comes from --backend URL or $ANARCHON_BACKEND. A change is live on every
running instance within one heartbeat (at once with Redis, Valkey or PostgreSQL).

Exit status: 0 on success, 1 when the store cannot be used (unreachable, or without
runtime control) or the job is unknown, 2 for a usage error (a missing option, a malformed
backend URL, a change refused as given: a bad cron, bad --params JSON). Errors are one
line on stderr; add --traceback to see where they came from.
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

from .. import __version__
from ..backends import Backend
from ..backends.capabilities import ControlStore
from ..backends.frameworks import shown
from ..backends.lab import add_scenarios_parser as add_lab_parser
from ..backends.lab import run_scenarios as run_lab
from ..control.status import Status, read_status, status_document, status_lines
from ..engine.scheduler import AsyncScheduler
from ..history import JobInfo
from ..tracebacks import summary
from .control_commands import COMMANDS as CONTROL_COMMANDS
from .control_commands import add_parsers as add_control_parsers
from .control_commands import check as check_control
from .control_commands import run as run_control
from .failures import CliFailure, UsageFailure, backend_for, check_readable, report
from .ops_commands import COMMANDS as OPS_COMMANDS
from .ops_commands import add_parsers as add_ops_parsers
from .ops_commands import run as run_ops

PROG = "anarchon"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG, description=__doc__.split("\n\n")[0].rstrip("."),
        epilog="\n\n".join(__doc__.split("\n\n")[1:]),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
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
        description="Delete every job (dynamic jobs included), run, attempt, shared value, "
                    "runtime-control record and manual-run request of one namespace (the "
                    "Redis prefix, the PostgreSQL/SQLite table). Stop its instances first. "
                    "Without --yes it only lists the jobs.")
    purge.add_argument("--yes", action="store_true",
                       help="really delete (without it, only list what would go)")
    forget = commands.add_parser(
        "forget", parents=[store],
        help="remove one job's records (registration, runs, history, requests)",
        description="Remove one job's records from a lease store: its registration, runs, "
                    "history, pending manual-run requests and shared values (not its "
                    "runtime-control record). For a job no instance declares any more "
                    "(`anarchon jobs` shows it GONE): one that still declares it "
                    "registers it again within 10 minutes. Without --yes it only says "
                    "what would go.")
    forget.add_argument("job", help="the job's name (see: anarchon jobs)")
    forget.add_argument("--yes", action="store_true",
                        help="really remove (without it, only say what would go)")
    commands.add_parser(
        "schema", parents=[store], help="print the SQL that creates a store's tables",
        description="Print the statements that create the tables of a PostgreSQL or "
                    "SQLite store (its table= option included), for a DBA to run as their "
                    "owner; then the application may use a role with only read/write "
                    "rights and ?create=0. Connects to nothing.")
    status = commands.add_parser(
        "status", parents=[store],
        help="show the live instances, the runs they hold, next slots and last failures")
    status.add_argument("--json", action="store_true", help="print JSON")
    add_ops_parsers(commands, store)
    add_control_parsers(commands, store)
    add_lab_parser(commands)
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
        if args.job not in {job.name for job in jobs}:
            known = ", ".join(job.name for job in jobs) or "none"
            raise CliFailure(f"unknown job {args.job!r} (jobs in this store: {known})")
        return list(await scheduler.history(args.job, args.count))
    finally:
        await scheduler.stop()


async def _jobs(backend: Backend) -> tuple[list[JobInfo], dict[str, list[str]]]:
    """Every job with its effective schedule, and the handler names instances offer."""
    scheduler = AsyncScheduler(backend)
    try:
        jobs = list(await scheduler.jobs())
        offers = (await scheduler.offered_handlers() if isinstance(backend, ControlStore)
                  else {})
        return jobs, offers
    finally:
        await scheduler.stop()


def _print_jobs(args: argparse.Namespace, jobs: list[JobInfo],
                offers: dict[str, list[str]]) -> None:
    if args.json:
        print(json.dumps({"jobs": [_plain(job) for job in jobs],
                          "handlers": {k: sorted(v) for k, v in sorted(offers.items())}},
                         indent=2))
        return
    if not jobs:
        print("no jobs in this store", file=sys.stderr)
    else:
        name_w = max(len("NAME"), *(len(job.name) for job in jobs))
        when_w = max(len("SCHEDULE"), *(len(job.schedule) for job in jobs))
        print(f"{'NAME':{name_w}}  {'SCHEDULE':{when_w}}  {'SOURCE':8}  {'FRAMEWORK':9}  "
              f"{'NEXT RUN (UTC)':19}  STATE")
        for job in jobs:
            next_run = "-" if job.next_run is None else f"{job.next_run:%Y-%m-%d %H:%M:%S}"
            print(f"{job.name:{name_w}}  {job.schedule:{when_w}}  {job.source:8}  "
                  f"{shown(job.framework):9}  {next_run:19}  {_state(job)}".rstrip())
    if offers:
        print("\nhandlers offered (instance: handler names):")
        for instance, names in sorted(offers.items()):
            print(f"  {instance}: {', '.join(sorted(names)) or '-'}")


def _state(job: JobInfo) -> str:
    """PAUSED, GONE (registered by no instance for 24 h), and a dynamic job's handler
    with the instances that can run it."""
    parts = ["PAUSED"] if job.paused else []
    if job.gone:
        parts.append("GONE (no instance registered it for 24 h; `anarchon forget JOB` "
                     "removes it)")
    if job.handler is not None:
        runnable = ", ".join(job.runnable_by) or "no instance offers it"
        parts.append(f"handler {job.handler} (runnable by: {runnable})")
    return "  ".join(parts)


async def _purge(args: argparse.Namespace, backend: Backend) -> str:
    try:
        names = sorted({job.name for job in await backend.known_jobs()}
                       | set(await _dynamic_jobs(backend)))
        if not args.yes:
            return (f"would delete {len(names)} job(s) with their history: "
                    f"{', '.join(names) or 'none'}; add --yes to delete")
        removed = await backend.purge()
        return f"deleted {len(names)} job(s): {removed} record(s)/key(s)"
    finally:
        await backend.close()


async def _dynamic_jobs(backend: Backend) -> list[str]:
    """Jobs with a control record (dynamic jobs no instance registered yet included)."""
    if not isinstance(backend, ControlStore):
        return []
    return list((await backend.read_controls()).records)


async def _forget(args: argparse.Namespace, backend: Backend) -> str:
    scheduler = AsyncScheduler(backend)
    try:
        jobs = {job.name: job for job in await scheduler.jobs()}
        job = jobs.get(args.job)
        if job is None:
            # a removed dynamic job is listed nowhere, but its registration and history
            # stay until forgotten: its records are what forget removes
            left = [spec for spec in await backend.known_jobs() if spec.name == args.job]
            if not left:
                known = ", ".join(jobs) or "none"
                raise CliFailure(f"unknown job {args.job!r} (jobs in this store: {known})")
            state = "a removed dynamic job"
        else:
            state = "gone" if job.gone else "still registered by an instance"
            if job.last_registered is not None:
                state += f", last registered {job.last_registered:%Y-%m-%d %H:%M:%S} UTC"
        if not args.yes:
            return f"would remove job {args.job!r} ({state}) and its history; add --yes"
        removed = await scheduler.forget(args.job)
        return f"removed job {args.job!r} ({state}): {removed} record(s)/key(s)"
    except NotImplementedError as exc:
        raise CliFailure(str(exc)) from exc
    finally:
        await scheduler.stop()


def _schema(backend: Backend) -> str:
    schema_sql = getattr(backend, "schema_sql", None)
    if schema_sql is None:
        raise UsageFailure(f"the {backend.name} store keeps no SQL tables: only PostgreSQL "
                           "and SQLite stores have a schema to print")
    text: str = schema_sql()
    return text


def _print_status(args: argparse.Namespace, status: Status) -> None:
    if args.json:
        print(json.dumps(status_document(status), indent=2))
    else:
        print("\n".join(status_lines(status)))


def _print_history(args: argparse.Namespace, rows: list[Any]) -> None:
    if args.json:
        print(json.dumps([_plain(row) for row in rows], indent=2))
        return
    if not rows:
        print("no runs yet", file=sys.stderr)
    for row in rows:
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
        return run_lab(args)
    try:
        if not args.backend:
            raise UsageFailure("give --backend URL or set ANARCHON_BACKEND")
        if args.command == "history" and args.count < 1:
            raise UsageFailure(f"--count must be at least 1, got {args.count}")
        if args.command in CONTROL_COMMANDS:
            check_control(args)
        backend = backend_for(args.backend)
        if args.command == "schema":
            print(_schema(backend), end="")
            return 0
        check_readable(backend)
        if args.command == "purge":
            print(asyncio.run(_purge(args, backend)))
        elif args.command == "forget":
            print(asyncio.run(_forget(args, backend)))
        elif args.command in CONTROL_COMMANDS:
            asyncio.run(run_control(args, backend))
        elif args.command == "status":
            _print_status(args, asyncio.run(read_status(backend)))
        elif args.command in OPS_COMMANDS:
            return run_ops(args, backend)
        elif args.command == "jobs":
            _print_jobs(args, *asyncio.run(_jobs(backend)))
        else:
            _print_history(args, asyncio.run(_read(args, backend)))
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        return report(f"{PROG} {args.command}", exc, args.backend, args.traceback)
    return 0


if __name__ == "__main__":
    sys.exit(main())
