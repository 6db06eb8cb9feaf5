"""Arguments of the runtime-control subcommands, shared by anything that parses them.

``pause JOB``, ``resume JOB``, ``reschedule JOB (--every D [--offset D] | --cron EXPR
[--timezone TZ] | --reset)``, ``add JOB --handler NAME (--every D | --cron EXPR
[--timezone TZ] | --at ISO) [--params JSON] [--option key=value ...]``, ``remove JOB``:
the same options as the core ``anarchon`` CLI. ``add_parsers()`` adds them to an
``argparse`` sub-parser set; ``reschedule_arguments()`` and ``add_arguments()`` turn the
parsed options into the keyword arguments of ``reschedule()`` and ``add_job()``, raising
``ArgumentError`` with a one-line message on bad input.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from typing import Any

from anarchon.cli_control import parse_options
from anarchon.clierrors import UsageFailure
from anarchon.control import DYNAMIC_OPTIONS

COMMANDS = ("pause", "resume", "reschedule", "add", "remove")


class ArgumentError(ValueError):
    """Options that cannot be turned into a call (one line, naming the option)."""


def add_parsers(sub: Any) -> dict[str, argparse.ArgumentParser]:
    """Add the five subcommands to ``sub`` (``parser.add_subparsers()``); by name."""
    parsers: dict[str, argparse.ArgumentParser] = {}
    for name, text in (("pause", "skip a job's slots on every instance until resumed"),
                       ("resume", "schedule a paused job again")):
        parsers[name] = sub.add_parser(name, help=text)
        parsers[name].add_argument("job")
    reschedule = sub.add_parser("reschedule", help="replace a job's schedule on every "
                                "instance, or --reset to the schedule in its code")
    reschedule.add_argument("job")
    schedule = reschedule.add_mutually_exclusive_group(required=True)
    schedule.add_argument("--every", help="interval: seconds or 30s, 5m, 1h30m")
    schedule.add_argument("--cron", help='cron expression, e.g. "0 3 * * *"')
    schedule.add_argument("--reset", action="store_true",
                          help="back to the schedule the job's code declares")
    reschedule.add_argument("--offset", help="with --every: shift the grid, e.g. 10s")
    reschedule.add_argument("--timezone", help="with --cron: IANA name (default UTC)")
    parsers["reschedule"] = reschedule
    add = sub.add_parser("add", help="store a dynamic job that every instance offering "
                         "its handler schedules (an existing one is updated)")
    add.add_argument("job")
    add.add_argument("--handler", required=True, help="the handler name instances offer")
    when = add.add_mutually_exclusive_group(required=True)
    when.add_argument("--every", help="interval: seconds or 30s, 5m, 1h30m")
    when.add_argument("--cron", help='cron expression, e.g. "0 3 * * *"')
    when.add_argument("--at", help="one run at an ISO 8601 date-time with offset")
    add.add_argument("--offset", help="with --every: shift the grid, e.g. 10s")
    add.add_argument("--timezone", help="with --cron: IANA name (default UTC)")
    add.add_argument("--params", help="JSON the handler receives as ctx.params (stored: "
                     "no secrets)")
    add.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                     help=f"a job option ({', '.join(sorted(DYNAMIC_OPTIONS))}); the value "
                          "is read as JSON when it parses (3, true, null), else as text "
                          "(10s); repeatable")
    parsers["add"] = add
    parsers["remove"] = sub.add_parser("remove", help="remove a dynamic job from every "
                                       "instance (its history stays)")
    parsers["remove"].add_argument("job")
    return parsers


def reschedule_arguments(options: dict[str, Any]) -> dict[str, Any]:
    """``reschedule()``'s keyword arguments from the parsed options."""
    if options.get("reset"):
        extra = [f"--{key}" for key in ("offset", "timezone") if options.get(key) is not None]
        if extra:
            raise ArgumentError(f"--reset takes no {' or '.join(extra)}")
        return {"reset": True}
    if options.get("offset") is not None and options.get("every") is None:
        raise ArgumentError("--offset goes with --every")
    if options.get("timezone") is not None and options.get("cron") is None:
        raise ArgumentError("--timezone goes with --cron")
    return {key: options[key] for key in ("every", "offset", "cron", "timezone")
            if options.get(key) is not None}


def add_arguments(options: dict[str, Any]) -> dict[str, Any]:
    """``add_job()``'s keyword arguments (without the name) from the parsed options."""
    if options.get("offset") is not None and options.get("every") is None:
        raise ArgumentError("--offset goes with --every")
    if options.get("timezone") is not None and options.get("cron") is None:
        raise ArgumentError("--timezone goes with --cron")
    job: dict[str, Any] = {key: options[key] for key in ("handler", "every", "offset",
                                                          "cron", "timezone", "at")
                           if options.get(key) is not None}
    if options.get("params") is not None:
        try:
            job["params"] = json.loads(options["params"])
        except json.JSONDecodeError as exc:
            raise ArgumentError(f"--params must be JSON: {exc}") from exc
    job.update(job_options(options.get("option") or []))
    return job


def job_options(pairs: Sequence[str]) -> dict[str, Any]:
    """``--option key=value`` pairs as job options (values: JSON if they parse), read by
    the core CLI's parser; a key that is no job option is refused here."""
    for pair in pairs:
        key, sep, _ = pair.partition("=")
        key = key.strip()
        if sep and key and key not in DYNAMIC_OPTIONS:
            raise ArgumentError(f"--option {key!r} is not a job option; choose from "
                                f"{', '.join(sorted(DYNAMIC_OPTIONS))}")
    try:
        return parse_options(pairs)
    except UsageFailure as exc:
        raise ArgumentError(str(exc)) from None
