"""``anarchon-dramatiq MODULE [MODULE ...] --backend URL``: the scheduler, on every instance.

Imports the modules (which set up the Dramatiq broker and declare actors, like
``dramatiq``'s own CLI), registers every actor marked with ``every/cron/at`` as an
anarchon job, offers every actor as the handler ``dramatiq:<actor_name>`` for dynamic
jobs (``add_job()``, the Django admin), and runs until SIGINT/SIGTERM (graceful stop:
a backup instance takes over a run that was being sent at once). Run it on as many
machines as you like: only the slot winner sends each message.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from collections.abc import Sequence
from typing import Any

import dramatiq

from anarchon import Backend, __version__
from anarchon.backends.capabilities import ControlStore
from anarchon.cli.failures import UsageFailure, report
from anarchon.durations import parse_duration
from anarchon.observability import port_from, serve_metrics

from .discovery import project_store
from .runner import build_scheduler
from .sending import all_actors, handler_name

PROG = "anarchon-dramatiq"


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="anarchon-dramatiq",
        description="Send scheduled Dramatiq actors from every instance; one message per "
                    "slot cluster-wide.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("modules", nargs="+", metavar="MODULE",
                        help="modules to import; MODULE:NAME picks the broker variable "
                             "(default: Dramatiq's global broker)")
    parser.add_argument("--backend",
                        help="anarchon store URL (redis://…?prefix=…, postgresql://…, "
                             "sqlite:///…); default $ANARCHON_BACKEND (read after the "
                             "modules are imported, so a module may set it), else, under "
                             "Django ($DJANGO_SETTINGS_MODULE, anarchon_django installed), "
                             "the project's ANARCHON store")
    parser.add_argument("--track", action="store_true",
                        help="track real outcomes for marks that do not set track= "
                             "(workers need AnarchonMiddleware)")
    parser.add_argument("--queue-lease", help="time a tracked message may wait in the "
                                              "queue before a backup re-sends it (10m)")
    parser.add_argument("--lease", help="lease length (30s)")
    parser.add_argument("--heartbeat", help="lease renewal interval (5s)")
    parser.add_argument("--jitter", help="default random delay before claiming (2s)")
    parser.add_argument("--max-late", help="default lateness limit of a claim (60s)")
    parser.add_argument("--metrics", action="store_true",
                        help="Prometheus metrics (needs the 'prometheus' extra)")
    parser.add_argument("--metrics-port", help="serve /metrics on this port (default "
                                               "$ANARCHON_METRICS_PORT; needs --metrics)")
    parser.add_argument("--instance-id", help="this instance's id (default host:pid:random)")
    parser.add_argument("--path", action="append", default=[],
                        help="add a directory to sys.path (default: the current one)")
    parser.add_argument("-v", "--verbose", action="count", default=0,
                        help="log more (-v: debug)")
    parser.add_argument("--stop-timeout", default="30s",
                        help="how long a graceful stop waits for sends in progress")
    parser.add_argument("--traceback", action="store_true",
                        help="print the full traceback of an error")
    return parser.parse_args(argv)


def load(modules: Sequence[str], paths: Sequence[str]) -> dramatiq.Broker:
    """Import ``modules``; the broker is the first ``MODULE:NAME`` or the global one."""
    for path in [*paths, os.getcwd()][::-1]:
        if path not in sys.path:
            sys.path.insert(0, path)
    broker: dramatiq.Broker | None = None
    for spec in modules:
        module_name, _, attribute = spec.partition(":")
        module = importlib.import_module(module_name)
        if attribute and broker is None:
            candidate = getattr(module, attribute, None)
            if not isinstance(candidate, dramatiq.Broker):
                raise TypeError(f"{spec} is not a Dramatiq broker: {candidate!r}")
            broker = candidate
    return broker if broker is not None else dramatiq.get_broker()


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``anarchon-dramatiq``; returns the exit status."""
    args = parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    backend_url: str | None = args.backend
    try:
        options: dict[str, Any] = {}
        for key in ("lease", "heartbeat", "jitter", "max_late"):
            value = getattr(args, key)
            if value is not None:
                options[key] = parse_duration(_number(value), option=key)
        if args.metrics:
            options["metrics"] = True
        port = port_from(args.metrics_port, "--metrics-port")
        if port is not None and not args.metrics:
            if args.metrics_port is not None:
                raise ValueError("--metrics-port needs --metrics")
            port = None  # ANARCHON_METRICS_PORT alone: metrics are off here
        broker = load(args.modules, args.path)
        backend_url = args.backend or os.environ.get("ANARCHON_BACKEND")
        backend: str | Backend | None = backend_url or project_store()
        if not backend:
            raise ValueError("--backend URL (or $ANARCHON_BACKEND, or a Django project "
                             "with anarchon_django) is required")
        scheduler = build_scheduler(
            backend, broker, track=args.track,
            queue_lease=_number(args.queue_lease) if args.queue_lease else None,
            instance_id=args.instance_id, **options)
    except (ImportError, TypeError, ValueError, LookupError) as exc:
        return report(PROG, UsageFailure(str(exc)).with_traceback(exc.__traceback__),
                      backend_url, args.traceback)
    logging.getLogger("anarchon.dramatiq").info(
        "scheduling %s on %s as %s; handlers for dynamic jobs: %s",
        ", ".join(scheduler.job_names) or "no marked actor", scheduler.backend.name,
        scheduler.instance_id,
        ", ".join(handler_name(a) for a in all_actors(broker))
        if isinstance(scheduler.backend, ControlStore)
        else "none (the store has no runtime control)")
    try:
        if port is not None:
            serve_metrics(port)
        scheduler.run(stop_timeout=parse_duration(args.stop_timeout, option="stop_timeout"))
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        return report(PROG, exc, backend_url, args.traceback)
    return 0


def _number(text: str) -> str | float:
    """``"2"`` → 2.0 (seconds); anything else stays a duration string."""
    try:
        return float(text)
    except ValueError:
        return text


if __name__ == "__main__":
    sys.exit(main())
