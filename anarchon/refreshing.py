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
from typing import TYPE_CHECKING

from .batching import chunks

if TYPE_CHECKING:
    from .engine import AsyncScheduler

#: how often a running instance registers its jobs again (seconds)
REGISTER_EVERY = 600.0
#: a job registered within this long is run by a live instance, most likely (seconds)
LIVE_WITHIN = 3 * REGISTER_EVERY
#: jobs per register call of a refresh
CHUNK = 1000


class RegistrationRefresh:
    """Registers the host's jobs again every ``every`` seconds while it runs."""

    def __init__(self, host: AsyncScheduler, every: float = REGISTER_EVERY) -> None:
        self.host = host
        self.every = every

    async def run(self) -> None:
        """Until cancelled (at stop): sleep, register every job again; a store error is
        an ``error`` event and the next period tries again."""
        while True:
            await asyncio.sleep(self.every)
            specs = [self.host._spec(job) for job in list(self.host._jobs.values())]
            try:
                for part in chunks(specs, CHUNK):
                    await self.host.backend.register(part)
            except Exception as exc:
                self.host._emit("error", None, error=exc)


__all__ = ["CHUNK", "LIVE_WITHIN", "REGISTER_EVERY", "RegistrationRefresh"]
