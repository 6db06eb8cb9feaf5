"""The runtime-control subcommands of ``anarchon``: pause, resume, reschedule, add, remove
and changes.

Each is one call of the core API (``AsyncScheduler.pause()`` …, anarchon/changing.py) on a
scheduler that is never started, so it works from any machine that reaches the store.
The core checks every request; this module only turns command-line text into the call's
arguments (``--params`` JSON, ``--option key=value``) and the core's refusals into one
line: exit 2 for a request refused as given (a bad cron, an unknown option, a dynamic
job that exists already), 1 for an unknown job or a store without runtime control.
"""

from __future__ import annotations

import argparse
import getpass
import json
import re
import socket
import sys
from collections.abc import Sequence
from typing import Any

from ..backends import Backend
from ..backends.capabilities import ControlStore
from ..control.changes import Change
from ..engine.scheduler import AsyncScheduler
from ..errors import JobNotFoundError
from . import control_tree
from .failures import CliFailure, UsageFailure

__all__ = ["COMMANDS", "add_parsers", "author", "check", "format_changes", "parse_options",
           "parse_params", "run"]

#: the subcommands this module runs
COMMANDS = control_tree.COMMANDS

#: the core's words for its keyword arguments -> the command's options
_API_WORDS = (
    (re.compile(r"\breplace=True\b"), "--replace"),
    (re.compile(r"\breset=True\b"), "--reset"),
    (re.compile(r"\bremove_job\(\)"), "`anarchon remove`"),
    (re.compile(r"\bpause\(\)"), "`anarchon pause`"),
    (re.compile(r"\b(every|cron|at|offset|timezone|params)="), r"--\1"),
)


def add_parsers(commands: Any, store: argparse.ArgumentParser) -> None:
    """Add the control subcommands to ``commands`` (argparse subparsers); ``store`` is
    the parent parser with ``--backend`` and ``--traceback``."""
    control_tree.add_parsers(commands, [store])


def author() -> str:
    """The default ``by`` of a change made with the command: ``user@host``."""
    try:
        user = getpass.getuser()
    except Exception:  # no login name in some containers
        user = "anarchon"
    return f"{user}@{socket.gethostname()}"


def parse_params(text: str | None) -> Any:
    """``--params``: JSON text (None: no params)."""
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError as exc:
        raise UsageFailure(f"--params must be JSON, got {text!r}: {exc}") from None


def parse_options(items: Sequence[str]) -> dict[str, Any]:
    """``--option key=value`` pairs; each value is JSON when it parses, else text (so
    ``jitter=0.5``, ``catch_up=true`` and ``timeout=30s`` all work)."""
    options: dict[str, Any] = {}
    for item in items:
        key, sep, text = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise UsageFailure(f"--option takes key=value, got {item!r}")
        if key in options:
            raise UsageFailure(f"--option {key} is given twice")
        try:
            options[key] = json.loads(text)
        except ValueError:
            options[key] = text
    return options


def check(args: argparse.Namespace) -> None:
    """Refuse malformed options before the store is opened (UsageFailure)."""
    if args.command == "changes" and args.count < 1:
        raise UsageFailure(f"--count must be at least 1, got {args.count}")
    if args.command in ("reschedule", "add"):
        if args.offset is not None and args.every is None:
            raise UsageFailure("--offset goes with --every only")
        if args.timezone is not None and args.cron is None:
            raise UsageFailure("--timezone goes with --cron only")
    if args.command != "changes" and args.by is not None and not args.by.strip():
        raise UsageFailure("--by must not be empty")
    if args.command == "add":
        parse_params(args.params)
        parse_options(args.option)


async def run(args: argparse.Namespace, backend: Backend) -> None:
    """Run one control subcommand on ``backend`` and print what it changed."""
    check(args)
    params = parse_params(args.params) if args.command == "add" else None
    options = parse_options(args.option) if args.command == "add" else {}
    scheduler = AsyncScheduler(backend)
    try:
        try:
            if args.command == "changes":
                changes = await scheduler.changes(args.job, args.count)
                if not changes:
                    await _require_known(scheduler, args.job)
                _print_changes(args, changes)
                return
            change = await _change(args, scheduler, params, options)
        except JobNotFoundError:
            raise CliFailure(await _unknown(scheduler, args.job)) from None
        except (TypeError, ValueError) as exc:
            message = _cli_words(" ".join(str(exc).split()))
            if not isinstance(backend, ControlStore):
                raise CliFailure(message) from exc
            if args.command == "remove" and args.job not in {
                    info.name for info in await scheduler.jobs()}:
                raise CliFailure(await _unknown(scheduler, args.job)) from None
            raise UsageFailure(message) from exc
        print(_describe(change))
        if change.action in ("add", "update"):
            await _warn_unoffered(scheduler, args.handler)
    finally:
        await scheduler.stop()


async def _change(args: argparse.Namespace, scheduler: AsyncScheduler, params: Any,
                  options: dict[str, Any]) -> Change:
    by = args.by.strip() if args.by else author()
    if args.command == "pause":
        return await scheduler.pause(args.job, by=by)
    if args.command == "resume":
        return await scheduler.resume(args.job, by=by)
    if args.command == "reschedule":
        return await scheduler.reschedule(args.job, every=args.every, cron=args.cron,
                                          timezone=args.timezone, offset=args.offset,
                                          reset=args.reset, by=by)
    if args.command == "add":
        return await scheduler.add_job(args.job, handler=args.handler, every=args.every,
                                       cron=args.cron, at=args.at, timezone=args.timezone,
                                       offset=args.offset, params=params,
                                       replace=args.replace, by=by, **options)
    return await scheduler.remove_job(args.job, by=by)


def _describe(change: Change) -> str:
    """One line: what the change did, its version and author."""
    job, detail = change.name, change.detail
    what = {
        "pause": f"paused job {job!r} on every instance",
        "resume": f"resumed job {job!r} on every instance",
        "reschedule": f"rescheduled job {job!r}: {detail.get('schedule')}",
        "reset": f"job {job!r} is back on the schedule its code declares",
        "add": f"added dynamic job {job!r}: handler {detail.get('handler')!r}, "
               f"{detail.get('schedule')}",
        "update": f"updated dynamic job {job!r}: handler {detail.get('handler')!r}, "
                  f"{detail.get('schedule')}",
        "remove": f"removed dynamic job {job!r} from every instance (its history stays)",
    }[change.action]
    return f"{what} (version {change.version}, by {change.by})"


async def _warn_unoffered(scheduler: AsyncScheduler, handler: str) -> None:
    offers = await scheduler.offered_handlers()
    if not any(handler in names for names in offers.values()):
        print(f"note: no running instance offers handler {handler!r} yet; the job runs "
              "once one does", file=sys.stderr)


def _print_changes(args: argparse.Namespace, changes: list[Change]) -> None:
    if changes or args.json:
        print(format_changes(changes, args.json))


def format_changes(changes: Sequence[Change], as_json: bool = False) -> str:
    """A change log as ``changes`` prints it: one line per change, or JSON."""
    if as_json:
        return json.dumps([{"job": c.name, "version": c.version, "action": c.action,
                            "by": c.by, "at": c.at.isoformat(), "detail": dict(c.detail)}
                           for c in changes], indent=2)
    lines = []
    for c in changes:
        detail = ", ".join(f"{key} {value}" for key, value in sorted(c.detail.items()))
        lines.append(f"{c.at:%Y-%m-%d %H:%M:%S}  version {c.version:<4} {c.action:10} "
                     f"by {c.by}{'  ' + detail if detail else ''}")
    return "\n".join(lines)


async def _require_known(scheduler: AsyncScheduler, job: str) -> None:
    """A job without changes: unknown (exit 1) or just never changed (a note)."""
    if job not in {info.name for info in await scheduler.jobs()}:
        raise CliFailure(await _unknown(scheduler, job))
    print("no changes yet", file=sys.stderr)


async def _unknown(scheduler: AsyncScheduler, job: str) -> str:
    known = ", ".join(info.name for info in await scheduler.jobs()) or "none"
    return f"unknown job {job!r} (jobs in this store: {known})"


def _cli_words(message: str) -> str:
    """The core's message, naming the command's options instead of keyword arguments."""
    for pattern, words in _API_WORDS:
        message = pattern.sub(words, message)
    return message
