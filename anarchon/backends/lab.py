"""The lab's parts, found through the ``anarchon.lab`` entry-point group.

The lab (the scenario runner, its naive stores, the Redis comparison strategies) is a
separate distribution, ``anarchon-lab``, in the ``lab/`` directory of the anarchon
repository; the core never imports it. A part asked for without the lab installed
raises ``ImportError`` saying what to install.
"""

from __future__ import annotations

import argparse
import sys
from importlib.metadata import entry_points
from typing import Any

#: the entry-point group the lab registers its parts in
GROUP = "anarchon.lab"
#: how to get the lab
INSTALL = ('pip install -e lab/ (the "anarchon-lab" distribution in the anarchon '
           "repository; scripts/setup.sh installs it in development)")


def lab_part(name: str, what: str) -> Any:
    """The lab's part ``name`` (an entry point of the ``anarchon.lab`` group), loaded;
    ``ImportError`` naming ``what`` and how to install the lab when it is missing."""
    for point in entry_points(group=GROUP):
        if point.name == name:
            return point.load()
    raise ImportError(f"{what} is lab code and the lab is not installed: {INSTALL}")


def add_scenarios_parser(subparsers: Any) -> None:
    """The ``anarchon scenarios`` subcommand: the lab's parser, or (without the lab) one
    that takes any arguments and says what to install."""
    try:
        lab_part("scenarios", "anarchon scenarios").add_parser(subparsers)
    except ImportError:
        parser = subparsers.add_parser(
            "scenarios", help="the lab's scenario runner (needs the lab: anarchon-lab)")
        parser.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)


def run_scenarios(args: argparse.Namespace) -> int:
    """Run ``anarchon scenarios``; without the lab, say what to install (status 2)."""
    try:
        cli = lab_part("scenarios", "anarchon scenarios")
    except ImportError as exc:
        print(f"anarchon: {exc}", file=sys.stderr)
        return 2
    status: int = cli.run(args)
    return status


__all__ = ["GROUP", "INSTALL", "add_scenarios_parser", "lab_part", "run_scenarios"]
