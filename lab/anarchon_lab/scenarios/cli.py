"""``anarchon scenarios``: the naive claim against the lease, with real processes.

    anarchon scenarios --backend redis|valkey|postgres|sqlite [--json] [--only SITUATION]

Each situation of docs/contract.md (*Failure scenarios*) runs with three instance processes
on a fresh namespace of the store, once per strategy; a progress line per run goes to
stderr, the table (or JSON) to stdout.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from .situations import BY_KEY
from .stores import DEFAULT_URLS, STRATEGIES


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``scenarios`` subcommand to ``subparsers`` (from ``add_subparsers()``)."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "scenarios", help="compare the naive claim with the lease under real faults",
        description=__doc__.split("\n\n")[0].replace("``", ""))
    parser.add_argument("--backend", required=True, choices=sorted(DEFAULT_URLS),
                        help="which store to run on")
    parser.add_argument("--url", help="server URL (default: $ANARCHON_<STORE>_URL or "
                                      "loopback; for sqlite a folder for the files)")
    parser.add_argument("--only", action="append", metavar="SITUATION",
                        help="run only this situation (repeat or comma-separate): "
                             + ", ".join(BY_KEY))
    parser.add_argument("--strategy", action="append", metavar="STRATEGY",
                        help="run only this strategy (repeatable); default all of the "
                             "store's: " + "; ".join(f"{k}: {', '.join(v)}"
                                                      for k, v in STRATEGIES.items()))
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    parser.add_argument("--markdown", action="store_true", help="print a markdown table")
    return parser


def _split(values: list[str] | None) -> list[str]:
    return [item.strip() for value in values or [] for item in value.split(",") if item.strip()]


def run(args: argparse.Namespace) -> int:
    """Run the scenarios chosen by ``args``; returns the exit status."""
    from .runner import run_all
    from .stores import store_for

    only, strategies = _split(args.only), _split(args.strategy)
    unknown = [key for key in only if key not in BY_KEY]
    if unknown:
        print(f"anarchon scenarios: unknown situation(s) {', '.join(unknown)}; use: "
              + ", ".join(BY_KEY), file=sys.stderr)
        return 2
    try:
        store = store_for(args.backend, args.url)
        for strategy in strategies:
            if strategy not in store.strategies:
                raise ValueError(f"backend {store.kind} has no strategy {strategy!r}; use "
                                 "one of: " + ", ".join(store.strategies))
    except ValueError as exc:
        print(f"anarchon scenarios: {exc}", file=sys.stderr)
        return 2

    def progress(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    rows = run_all(store, strategies or None, only or None, progress)
    if args.json:
        print(json.dumps([row.as_dict() for row in rows], indent=2))
    else:
        from .table import render

        print(render(rows, markdown=args.markdown))
    return 1 if any(row.error for row in rows) else 0


def main(argv: list[str] | None = None) -> int:
    """``python -m anarchon_lab.scenarios``: the subcommand on its own."""
    parser = argparse.ArgumentParser(prog="anarchon")
    add_parser(parser.add_subparsers(dest="command", required=True))
    return run(parser.parse_args(argv))


__all__ = ["add_parser", "main", "run"]
