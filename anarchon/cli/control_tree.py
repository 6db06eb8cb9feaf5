"""The argparse tree of the runtime-control subcommands, one for every command line that
offers them: ``anarchon pause | resume | reschedule | add | remove | changes`` and
``manage.py anarchon`` (the same subcommands, options and help).

``pause JOB``, ``resume JOB``, ``reschedule JOB (--every D [--offset D] | --cron EXPR
[--timezone TZ] | --reset)``, ``add JOB --handler NAME (--every D | --cron EXPR
[--timezone TZ] | --at ISO) [--params JSON] [--option key=value ...] [--replace]``,
``remove JOB``, each with ``--by TEXT`` (the change log's author), and ``changes JOB
[--count N] [--json]``.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

__all__ = ["COMMANDS", "add_parsers"]

#: the subcommands of the tree
COMMANDS = ("pause", "resume", "reschedule", "add", "remove", "changes")


def add_parsers(commands: Any, parents: Sequence[argparse.ArgumentParser] = ()
                ) -> dict[str, argparse.ArgumentParser]:
    """Add the control subcommands to ``commands`` (``parser.add_subparsers()``), each
    with ``parents`` (e.g. the core CLI's ``--backend``); returns them by name."""
    store = list(parents)
    who = argparse.ArgumentParser(add_help=False)
    who.add_argument("--by", metavar="TEXT",
                     help="who makes the change, for the change log (default: user@host)")
    made: dict[str, argparse.ArgumentParser] = {}
    for name, text in (("pause", "skip every slot of a job on every instance until resumed"),
                       ("resume", "schedule a paused job again, from its next slot")):
        sub = commands.add_parser(name, parents=[*store, who], help=text, description=text)
        sub.add_argument("job", help="the job's name (see: anarchon jobs)")
        made[name] = sub

    reschedule = commands.add_parser(
        "reschedule", parents=[*store, who],
        help="replace a job's schedule on every instance (or go back to its code's)",
        description="Store a schedule that replaces the one the job's code declares, on "
                    "every instance, until --reset.")
    reschedule.add_argument("job", help="the job's name (see: anarchon jobs)")
    made["reschedule"] = reschedule
    which = reschedule.add_mutually_exclusive_group(required=True)
    which.add_argument("--every", metavar="DURATION", help="an interval: 30s, 5m, 1h30m")
    which.add_argument("--cron", metavar="EXPR", help='a cron expression: "0 3 * * *"')
    which.add_argument("--reset", action="store_true",
                       help="go back to the schedule the job's code declares")
    reschedule.add_argument("--offset", metavar="DURATION", help="with --every: a shift")
    reschedule.add_argument("--timezone", metavar="TZ",
                            help="with --cron: its time zone (default UTC)")

    add = commands.add_parser(
        "add", parents=[*store, who], help="store a dynamic job that runs a named handler",
        description="Store a dynamic job: every instance offering the handler schedules "
                    "it. --params is stored in the store: never put secrets in it.")
    add.add_argument("job", help="the new job's name")
    made["add"] = add
    add.add_argument("--handler", required=True, metavar="NAME",
                     help="the handler name instances offer (see: anarchon jobs)")
    when = add.add_mutually_exclusive_group(required=True)
    when.add_argument("--every", metavar="DURATION", help="an interval: 30s, 5m, 1h30m")
    when.add_argument("--cron", metavar="EXPR", help='a cron expression: "0 3 * * *"')
    when.add_argument("--at", metavar="ISO", help="one instant: 2027-01-01T03:00:00+01:00")
    add.add_argument("--offset", metavar="DURATION", help="with --every: a shift")
    add.add_argument("--timezone", metavar="TZ", help="with --cron: its time zone (UTC)")
    add.add_argument("--params", metavar="JSON",
                     help="JSON the handler receives as ctx.params (stored: no secrets)")
    add.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                     help="a job option (jitter, max_late, timeout, overlap, max_attempts, "
                          "catch_up, history_size, history_ttl); the value is read as "
                          "JSON when it is JSON, else as text; repeatable")
    add.add_argument("--replace", action="store_true",
                     help="update the dynamic job if it exists (else that is an error)")

    remove = commands.add_parser("remove", parents=[*store, who],
                                 help="remove a dynamic job from every instance",
                                 description="Remove a dynamic job from every instance; "
                                             "its history stays.")
    remove.add_argument("job", help="the dynamic job's name")
    made["remove"] = remove

    changes = commands.add_parser("changes", parents=store,
                                  help="show a job's change log (who changed what, when)")
    changes.add_argument("job", help="the job's name")
    made["changes"] = changes
    changes.add_argument("--count", type=int, default=20, help="how many changes (20)")
    changes.add_argument("--json", action="store_true", help="print JSON")
    return made
