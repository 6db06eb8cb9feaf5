"""The manual-run calls of [`AsyncScheduler`][anarchon.AsyncScheduler] that go through the
store: ``trigger()`` and ``forget()``, by the rules of ``anarchon.backends.trigger_rules``
(the same on every store; the Django layer calls ``trigger_args()`` for its own
thread's requests)."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from ..backends.base import Backend
from ..backends.capabilities import NO_FORGET, TriggerStore, as_triggers
from ..errors import JobNotFoundError
from ..jobs.definition import Job
from ..jobs.name_checks import check_job_name


class TriggerCalls:
    """``trigger()``, ``trigger_args()`` and ``forget()`` on one view of the store."""

    def __init__(self, backend: Backend, jobs: Mapping[str, Job],
                 ensure_open: Callable[[], Awaitable[None]],
                 listed: Callable[[str], Awaitable[bool]]) -> None:
        self.backend = backend
        #: the scheduler's jobs (read only)
        self.jobs_here = jobs
        #: connects to the store on demand
        self.ensure_open = ensure_open
        #: whether ``jobs()`` lists a job (``RuntimeControl.listed``)
        self.listed = listed

    async def trigger(self, name: str, data: Any = None) -> str:
        """See the scheduler's method of this name (``control.calls``)."""
        payload, exclusive = self.trigger_args(name, data)
        await self.ensure_open()
        if not isinstance(self.backend, TriggerStore):
            raise TypeError(f"backend {self.backend.name} does not support trigger(); "
                            "use run_now() in a process that has the job")
        if not await self.listed(name):
            known = {spec.name for spec in await self.backend.known_jobs()} | set(self.jobs_here)
            raise JobNotFoundError(f"no job named {name!r} in the store (jobs() lists no such "
                                   f"job); registered: {sorted(known) or 'none'}")
        return await self.backend.request_trigger(name, payload, exclusive=exclusive)

    def trigger_args(self, name: str, data: Any = None) -> tuple[str | None, bool]:
        """See the scheduler's method of this name (``control.calls``)."""
        check_job_name(name)
        try:
            payload = None if data is None else json.dumps(data)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"trigger data for job {name!r} must be JSON-serialisable: "
                            f"{exc}") from exc
        job = self.jobs_here.get(name)
        return payload, job is None or job.overlap != "allow"

    async def forget(self, name: str) -> int:
        """See the scheduler's method of this name (``control.calls``)."""
        check_job_name(name)
        store = as_triggers(self.backend, NO_FORGET)
        await self.ensure_open()
        return await store.forget(name)
