"""``celery worker -B``: refuse ``-S anarchon``, which is the worker's ``--statedb``.

``celery beat -S anarchon`` selects the scheduler; ``celery worker -B -S anarchon``
silently names a state file instead and runs stock beat, which publishes every slot once
per worker. At ``celeryd_init`` (the worker's start, its options in hand) this check
stops such a worker with a message that names ``--scheduler``; a worker with ``-B`` whose
app configures an anarchon store but whose beat is another scheduler gets a WARNING.

The check is connected when ``anarchon_celery`` is imported, and by the ``celery
anarchon`` command's entry point, which every ``celery`` command line loads.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Mapping
from typing import Any

logger = logging.getLogger("anarchon.celery")

_connected = False
_lock = threading.Lock()


def is_anarchon_scheduler(scheduler: Any) -> bool:
    """Whether ``scheduler`` (a name, an alias or a class) is ``anarchon_celery``'s."""
    if isinstance(scheduler, str):
        name = scheduler.strip()
        return name == "anarchon" or name.startswith("anarchon_celery")
    module = getattr(scheduler, "__module__", "") or ""
    return module.startswith("anarchon_celery")


def check_worker_options(options: Mapping[str, Any], conf: Any) -> str | None:
    """Why a ``celery worker`` with these options must not start (``None``: it may);
    logs a WARNING for a beat that is not anarchon's in an app configured for it."""
    if not options.get("beat"):
        return None
    scheduler = options.get("scheduler") or _get(conf, "beat_scheduler")
    if is_anarchon_scheduler(scheduler):
        return None
    statedb = str(options.get("statedb") or "")
    if "anarchon" in os.path.basename(statedb).lower():
        return (f"celery worker -B -S {statedb}: a worker's -S is --statedb (a state file), "
                f"not the scheduler, so this worker would run {scheduler or 'stock beat'}, "
                "which publishes every slot once per worker. Use --scheduler anarchon "
                "(celery worker -B --scheduler anarchon_celery:Scheduler) or set "
                "beat_scheduler = 'anarchon_celery:Scheduler'")
    if _get(conf, "anarchon_backend"):
        logger.warning("celery worker -B runs beat with %s, not anarchon_celery's scheduler, "
                       "though the app sets anarchon_backend: every such worker publishes "
                       "every slot; use --scheduler anarchon", scheduler)
    return None


def _get(conf: Any, key: str) -> Any:
    try:
        return conf.get(key)
    except Exception:  # a conf that cannot answer: nothing to check
        return None


def _on_celeryd_init(sender: Any = None, instance: Any = None, conf: Any = None,
                     options: Mapping[str, Any] | None = None, **_: Any) -> None:
    reason = check_worker_options(dict(options or {}), conf)
    if reason is not None:
        logger.critical("%s", reason)
        # SystemExit passes through Celery's signal dispatch (it only catches Exception)
        raise SystemExit(f"anarchon_celery: {reason}")


def connect() -> None:
    """Connect the check to ``celeryd_init`` (idempotent)."""
    global _connected
    from celery import signals

    with _lock:
        if not _connected:
            signals.celeryd_init.connect(_on_celeryd_init, weak=False)
            _connected = True


__all__ = ["check_worker_options", "connect", "is_anarchon_scheduler"]
