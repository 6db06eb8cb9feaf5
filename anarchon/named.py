"""The table of named schedulers: configured ones, and jobs waiting for their name.

Kept apart from ``anarchon.registry`` (which configures and starts them) so that
class-body marks (``anarchon.registering``) can find where a named scheduler's jobs
go without importing the registry's scheduler machinery.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .jobs import Handler, resolve_job
from .names import check_job_name

if TYPE_CHECKING:
    from .sync import Scheduler


class _Pending:
    """Jobs registered on a named scheduler that has not been configured yet."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.jobs: list[tuple[str, str, Any, Handler, Mapping[str, Any]]] = []

    def declare_job(self, kind: str, name: str, when: Any, handler: Handler,
                    options: Mapping[str, Any]) -> None:
        """Check what can be checked without a backend now; the rest when configured."""
        check_job_name(name)
        if any(existing[1] == name for existing in self.jobs):
            raise ValueError(f"job {name!r} is already registered on scheduler {self.name!r}")
        resolve_job(kind, name, when, options, handler=handler)
        self.jobs.append((kind, name, when, handler, options))


_lock = threading.RLock()
_schedulers: dict[str, Scheduler] = {}
_pending: dict[str, _Pending] = {}


def registry_target(name: str) -> Any:
    """Where jobs for the named scheduler go: the scheduler, or its pending list."""
    with _lock:
        if name in _schedulers:
            return _schedulers[name].core
        return _pending.setdefault(name, _Pending(name))
