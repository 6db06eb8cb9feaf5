"""The manual-run calls of [`AsyncScheduler`][anarchon.AsyncScheduler] that go through the
store: ``trigger()`` and ``forget()``, by the rules of ``anarchon.backends.trigger_rules``
(the same on every store; the Django layer calls ``trigger_args()`` for its own
thread's requests)."""

from __future__ import annotations

import json
from typing import Any

from .backends.base import Backend
from .errors import JobNotFoundError
from .jobs import Job
from .names import check_job_name


class TriggerCalls:
    """``trigger()``, ``trigger_args()`` and ``forget()``."""

    backend: Backend
    _jobs: dict[str, Job]

    async def _ensure_open(self) -> None:
        raise NotImplementedError  # provided by the engine

    async def trigger(self, name: str, data: Any = None) -> str:
        """Ask, through the store, that exactly one running instance with job ``name``
        runs it now (reason ``manual``). Works from any process, even one without jobs.

        ``data`` must be JSON-serialisable; it is stored until the run starts, so it must
        not hold secrets. Returns the request id. One manual run at a time: while a
        request for ``name`` is pending or a manual run of it is running (one started
        more than ``backend.stale_manual_after``, default 1 hour, ago no longer counts:
        its instance was most likely killed), this raises
        [`TriggerRefusedError`][anarchon.errors.TriggerRefusedError], unless the job is
        declared here with ``overlap="allow"``. A request no instance takes within
        ``backend.trigger_ttl`` (default ``max(lease, 60 s)``) is dropped unrun.
        """
        payload, exclusive = self.trigger_args(name, data)
        await self._ensure_open()
        if not self.backend.supports_triggers:
            raise TypeError(f"backend {self.backend.name} does not support trigger(); "
                            "use run_now() in a process that has the job")
        known = {spec.name for spec in await self.backend.known_jobs()} | set(self._jobs)
        if name not in known:
            raise JobNotFoundError(f"no job named {name!r} in the store; known: "
                                   f"{sorted(known) or 'none'}")
        return await self.backend.request_trigger(name, payload, exclusive=exclusive)

    def trigger_args(self, name: str, data: Any = None) -> tuple[str | None, bool]:
        """What ``trigger(name, data)`` stores (no I/O): ``data`` as JSON text, and
        whether the request is exclusive (one manual run at a time: unless ``name`` is
        declared here with ``overlap="allow"``). Raises ``TypeError`` for non-JSON."""
        check_job_name(name)
        try:
            payload = None if data is None else json.dumps(data)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"trigger data for job {name!r} must be JSON-serialisable: "
                            f"{exc}") from exc
        job = self._jobs.get(name)
        return payload, job is None or job.overlap != "allow"

    async def forget(self, name: str) -> int:
        """Remove job ``name``'s records from the store (registration, runs, history,
        pending requests, shared values; not its runtime-control record); how many.

        For a job no instance declares any more (``JobInfo.gone``): an instance that still
        has it registers it again within ``anarchon.refreshing.REGISTER_EVERY``.
        Claim-only stores raise ``NotImplementedError``."""
        check_job_name(name)
        await self._ensure_open()
        return await self.backend.forget(name)
