"""Noticing what would otherwise stay silent: skipped slots and outcomes that never arrive.

``SlotLog`` logs every skip of a marked actor's slot (``overlap`` and ``late`` at
WARNING, ``taken`` — another instance won it — at DEBUG).

``OutcomeWatch`` checks, once ``queue_lease`` has passed after a tracked message was
sent, that a worker took the run over (renewed its lease or recorded an outcome). If not,
and no worker has ever recorded an outcome of the job, the workers lack
``AnarchonMiddleware``: logged at ERROR as a configuration error
naming it. A job whose outcomes did arrive before gets a WARNING instead (a backlog in
the queue, or a lost worker). One check per job is pending at a time.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from anarchon import AsyncScheduler, Event
from anarchon.backends.base import LeaseBackend

logger = logging.getLogger("anarchon.dramatiq")

#: after ``queue_lease``, wait this long (plus one heartbeat) before judging: a backup's
#: takeover or a worker's first renewal may be that late
CHECK_MARGIN = 0.5

_SKIPS = {
    "overlap": "the job's previous run still holds its lease (overlap='skip'; a tracked "
               "run holds it until its outcome arrives or queue_lease passes)",
    "late": "it was claimed more than max_late after the slot (the scheduler was busy, "
            "paused or started late)",
    "taken": "another instance won it",
}


class SlotLog:
    """An ``on("skip")`` listener logging skipped slots of the jobs named ``names``."""

    def __init__(self, names: set[str]) -> None:
        self.names = names

    def __call__(self, event: Event) -> None:
        if event.name not in self.names:
            return
        level = logging.DEBUG if event.reason == "taken" else logging.WARNING
        logger.log(level, "job %r slot %s skipped: %s", event.name, event.slot,
                   _SKIPS.get(event.reason or "", event.reason))


class OutcomeWatch:
    """Checks that tracked messages' outcomes reach the store (see the module docstring).

    Attach with ``core.on("start", watch.on_start)`` (it learns the scheduler's loop from
    the first run) and call ``expect()`` from the sender after each tracked send.
    """

    def __init__(self, core: AsyncScheduler) -> None:
        self.core = core
        self._loop: asyncio.AbstractEventLoop | None = None
        #: jobs with a check pending (one at a time per job)
        self._pending: set[str] = set()
        self._checks: set[asyncio.Task[None]] = set()

    def on_start(self, event: Event) -> None:
        """Listener for ``start`` events: runs on the scheduler's loop."""
        if self._loop is None:
            self._loop = asyncio.get_running_loop()

    def expect(self, name: str, slot: int, attempt: int, queue_lease: float, *,
               resend: bool) -> None:
        """Check run ``(name, slot, attempt)`` once ``queue_lease`` has passed (thread-safe)."""
        loop = self._loop
        if loop is None or not isinstance(self.core.backend, LeaseBackend):
            return
        wait = queue_lease + self.core.options.heartbeat + CHECK_MARGIN

        def arm() -> None:
            if name not in self._pending:
                self._pending.add(name)
                loop.call_later(wait, self._spawn, name, slot, attempt, queue_lease, resend)

        loop.call_soon_threadsafe(arm)

    def _spawn(self, name: str, *args: Any) -> None:
        if self.core.running:
            task = asyncio.ensure_future(self._check(name, *args))
            self._checks.add(task)
            task.add_done_callback(self._checks.discard)
        else:
            self._pending.discard(name)

    async def _check(self, name: str, slot: int, attempt: int, queue_lease: float,
                     resend: bool) -> None:
        try:
            if self.core.running:
                await self._judge(name, slot, attempt, queue_lease, resend)
        except Exception as exc:  # the store is down: its errors are reported elsewhere
            logger.debug("job %r slot %s: outcome check failed: %s", name, slot, exc)
        finally:
            self._pending.discard(name)

    async def _judge(self, name: str, slot: int, attempt: int, queue_lease: float,
                     resend: bool) -> None:
        backend = self.core.backend
        assert isinstance(backend, LeaseBackend)
        records = await self.core.history(name, 50)
        states = await backend.unfinished([name])
        record = next((r for r in records if r.slot == slot and r.attempt == attempt
                       and not r.manual), None)
        if record is None or record.status in ("success", "failure"):
            return  # reported (or trimmed from history already: nothing to judge)
        state = next((s for s in states if s.slot == slot and s.attempt == attempt), None)
        if record.status == "running" and state is not None and not state.lease_expired:
            return  # a worker renews the lease: the middleware is there
        ever = any(r.status in ("success", "failure") and not r.manual for r in records)
        self._report(name, slot, attempt, queue_lease, resend, ever)

    def _report(self, name: str, slot: int, attempt: int, queue_lease: float,
                resend: bool, ever: bool) -> None:
        after = ("a backup scheduler sends the slot again as the next attempt "
                 "(resend=True), which may run the actor again" if resend else
                 "the slot is not sent again (resend=False): the actor ran at most once, "
                 "and the run ends interrupted")
        if not ever:
            logger.error(
                "configuration error? job %r slot %s attempt %d: the outcome of its tracked "
                "message did not arrive within queue_lease (%gs). The workers' broker needs "
                "anarchon_dramatiq.AnarchonMiddleware on this store (%s), added before "
                "Retries: anarchon_dramatiq.install_middleware(broker, STORE_URL); without "
                "it no outcome is ever recorded and, with overlap='skip', every slot within "
                "queue_lease of a sent one is skipped. (Or the message waited in the queue "
                "longer than queue_lease: raise queue_lease.) Now %s.",
                name, slot, attempt, queue_lease, self.core.backend.name, after)
        else:
            logger.warning("job %r slot %s attempt %d: no worker reported its message "
                           "within queue_lease (%gs): it is still queued (a backlog) or its "
                           "worker was lost; %s", name, slot, attempt, queue_lease, after)
