"""Registrations kept fresh: a running instance registers its jobs again every
``REGISTER_EVERY``, so the store knows which jobs some instance still declares.

A job's last registration time (``JobSpec.registered_ms``, shown as
``JobInfo.last_registered``) then says whether an instance runs it: registered within
``LIVE_WITHIN``, most likely yes; not for ``GONE_AFTER_MS``
(``anarchon.backends.trigger_rules``), the job is *gone* (``JobInfo.gone``). The refresh
is one sleeping task per scheduler that sends the jobs in chunks of ``CHUNK``: one store
call per ``CHUNK`` jobs per ``REGISTER_EVERY``.
"""

from __future__ import annotations

import asyncio

from ..engine.batcher import chunks
from ..engine.runtime import Runtime, job_spec

#: how often a running instance registers its jobs again (seconds)
REGISTER_EVERY = 600.0
#: a job registered within this long is run by a live instance, most likely (seconds)
LIVE_WITHIN = 3 * REGISTER_EVERY
#: jobs per register call of a refresh
CHUNK = 1000


class RegistrationRefresh:
    """Registers the runtime's jobs again every ``every`` seconds while it runs."""

    def __init__(self, runtime: Runtime, every: float | None = None) -> None:
        self.runtime = runtime
        #: seconds between two refreshes (default: ``REGISTER_EVERY`` when constructed)
        self.every = REGISTER_EVERY if every is None else every

    async def run(self) -> None:
        """Until cancelled (at stop): sleep, register every job again; a store error is
        an ``error`` event and the next period tries again."""
        while True:
            await asyncio.sleep(self.every)
            specs = [job_spec(job) for job in list(self.runtime.jobs.values())]
            try:
                for part in chunks(specs, CHUNK):
                    await self.runtime.backend.register(part)
            except Exception as exc:
                self.runtime.emit("error", None, error=exc)


__all__ = ["CHUNK", "LIVE_WITHIN", "REGISTER_EVERY", "RegistrationRefresh"]
