"""The table of named schedulers: configured ones, and jobs waiting for their name.

Kept apart from ``anarchon.jobs.global_api`` (which configures and starts them) so that
class-body marks (``anarchon.jobs.job_registry``) can find where a named scheduler's jobs
go without importing the registry's scheduler machinery.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from .definition import Handler, resolve_job
from .name_checks import check_job_name


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


#: guards both tables (``anarchon.jobs.global_api`` holds it while it configures)
lock = threading.RLock()
#: configured name -> where its jobs go (its scheduler's ``core``)
targets: dict[str, Any] = {}
#: name not configured yet -> the jobs registered on it meanwhile
pending: dict[str, _Pending] = {}


def registry_target(name: str) -> Any:
    """Where jobs for the named scheduler go: the scheduler, or its pending list."""
    with lock:
        if name in targets:
            return targets[name]
        return pending.setdefault(name, _Pending(name))
