"""``python -m anarchon_celery import-redbeat -A proj [--redis URL] [--key-prefix P]
[--apply]``: carry celery-redbeat's entries over to stored anarchon entries.

A dry run by default: the table shows each entry old -> new and what ``--apply`` would
do; nothing is written. Applying again changes nothing (rows read ``same``).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from anarchon_celery.importers.plan import apply, plan, print_table


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m anarchon_celery")
    commands = parser.add_subparsers(dest="command", required=True)
    redbeat = commands.add_parser("import-redbeat", help="import celery-redbeat's entries")
    redbeat.add_argument("-A", "--app", required=True,
                         help="the Celery app, as for celery -A (module or module:app)")
    redbeat.add_argument("--redis", help="redbeat's Redis URL (default: the app's "
                         "redbeat_redis_url, else its broker_url)")
    redbeat.add_argument("--key-prefix", help="redbeat's key prefix (default: the app's "
                         "redbeat_key_prefix, else 'redbeat:')")
    redbeat.add_argument("--apply", action="store_true",
                         help="write the entries (default: dry run, nothing written)")
    return parser


def load_app(name: str) -> Any:
    """The Celery app ``name`` as ``celery -A`` finds it."""
    from celery.app.utils import find_app

    try:
        return find_app(name)
    except Exception as exc:  # whatever importing the user's module raises
        raise RuntimeError(f"cannot load the Celery app {name!r} (as celery -A {name} "
                           f"would): {type(exc).__name__}: {exc}") from exc


def import_redbeat(app: Any, *, redis_url: str | None, key_prefix: str | None,
                   write: bool, out: Any) -> int:
    """Plan (and with ``write`` apply) redbeat's entries; prints the table."""
    import redis

    from anarchon_celery.importers.redbeat import read_sources

    url = redis_url or app.conf.get("redbeat_redis_url") or app.conf.broker_url
    prefix = key_prefix if key_prefix is not None else (
        app.conf.get("redbeat_key_prefix") or "redbeat:")
    client = redis.Redis.from_url(url)
    try:
        sources = read_sources(app, client, prefix)
    finally:
        client.close()
    rows = plan(app, sources)
    if write:
        apply(rows)
    print_table(rows, out, applied=write)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """The command line; returns the exit status."""
    args = _parser().parse_args(argv)
    try:
        app = load_app(args.app)
        return import_redbeat(app, redis_url=args.redis, key_prefix=args.key_prefix,
                              write=args.apply, out=sys.stdout)
    except Exception as exc:  # a command line: one clear line, not a traceback
        print(f"python -m anarchon_celery {args.command}: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
