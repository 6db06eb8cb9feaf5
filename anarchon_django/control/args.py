"""Arguments of the runtime-control subcommands of ``manage.py anarchon``.

``pause | resume | reschedule | add | remove | changes``: the core ``anarchon`` CLI's own
argparse tree (``anarchon.cli.control_tree``: ``--by``, ``--replace``, ``changes
--count --json`` included), added by ``add_parsers()`` to an ``argparse`` sub-parser
set; ``reschedule_arguments()`` and ``add_arguments()`` turn the parsed options into the
keyword arguments of ``reschedule()`` and ``add_job()``, raising ``ArgumentError`` with a
one-line message on bad input.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from typing import Any

from anarchon.cli import control_tree
from anarchon.cli.control_commands import parse_options
from anarchon.cli.failures import UsageFailure
from anarchon.control.changes import DYNAMIC_OPTIONS

COMMANDS = control_tree.COMMANDS


class ArgumentError(ValueError):
    """Options that cannot be turned into a call (one line, naming the option)."""


def add_parsers(sub: Any) -> dict[str, argparse.ArgumentParser]:
    """Add the control subcommands to ``sub`` (``parser.add_subparsers()``); by name. The
    tree is the core CLI's ([`anarchon.cli.control_tree`][anarchon.cli.control_tree])."""
    return control_tree.add_parsers(sub)


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
