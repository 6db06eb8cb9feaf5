"""Claims whose answer an outage swallowed: decided again once the store answers.

A claim that failed, and whose ``confirm()`` failed too, may or may not have been
written. Instead of giving the slot up, the newest such slot of each job is kept and
retried with a backoff: once the store answers, ``confirm()`` says whether this instance
won it (then it runs, if its lease can still be trusted), else, if the job's next slot
is not near (``RECOVER_WITHIN``), it is claimed once more as ``catch-up`` bounded by the
job's ``max_late``, so the slot runs once cluster-wide. Older slots of the same outage are
missed, never run late in a flood.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Callable
from typing import Protocol

from ..backends.base import ClaimReason, ClaimRequest, RunKey
from ..jobs.definition import Job
from .aio import wait_event
from .backlog import Backlog
from .lease_keeper import LeaseKeeper
from .runtime import Runtime

logger = logging.getLogger("anarchon")

#: a lost slot is claimed again only within this fraction of the gap to its job's next
#: slot: later, its run would still hold its lease when the next slot is claimed (and,
#: with overlap="skip", cost that slot); the next slot runs on time instead
RECOVER_WITHIN = 0.8
#: first and longest wait between two attempts to reach the store (seconds): a slot is
#: recovered only before its job's next slot, so the store's return must be noticed soon
FIRST_RETRY = 0.1
LONGEST_RETRY = 0.25


@dataclasses.dataclass(frozen=True)
class Unknown:
    """A claim of ``job`` whose outcome is unknown, sent at ``sent_at`` (monotonic)."""

    job: Job
    request: ClaimRequest
    sent_at: float


class Claimer(Protocol):
    """What recovery does with a decided claim (``Claims``)."""

    backlog: Backlog

    def claimed(self, job: Job, request: ClaimRequest, outcome: str, attempt: int,
                sent_at: float, store_ms: int | None = None) -> None: ...

    async def claim_and_run(self, job: Job, slot: int, reason: ClaimReason,
                            expected_attempt: int = 0, version: int | None = None,
                            catch_up_ms: int | None = None) -> None: ...


class Recovery:
    """The claims of one scheduler whose answers were lost, newest per job."""

    def __init__(self, runtime: Runtime, claims: Claimer,
                 keeper: Callable[[], LeaseKeeper | None]) -> None:
        self.runtime = runtime
        self.claims = claims
        #: the lease keeper, once started (none on a claim-only backend)
        self.keeper = keeper
        self.pending: dict[str, Unknown] = {}
        self._task: asyncio.Task[None] | None = None
        self._woken = asyncio.Event()
        #: slots claimed again already: a second failure gives them up (no retry loop
        #: on an error that is not an outage)
        self._reclaimed: set[RunKey] = set()

    def add(self, job: Job, request: ClaimRequest, sent_at: float) -> None:
        """Remember an unknown claim (an older one of the same job is given up)."""
        if request.reason == "takeover":
            return  # the run is watched: its lease expiring brings the takeover again
        if RunKey(job.name, request.slot) in self._reclaimed:
            return
        known = self.pending.get(job.name)
        if known is not None and known.request.slot >= request.slot:
            self._missed(job, request.slot)
            return
        if known is not None:
            self._missed(job, known.request.slot)
        self.pending[job.name] = Unknown(job, request, sent_at)
        if self._task is None or self._task.done():
            self._task = self.runtime.spawn(self._retry())

    def _missed(self, job: Job, slot: int) -> None:
        """A slot of the outage given up here (skip reason ``missed``)."""
        self.claims.backlog.skip(job.name, "missed")
        self.runtime.emit("skip", job.name, slot, reason="missed")

    def wake(self) -> None:
        """Another store call was answered: try the pending claims now."""
        if self.pending:
            self._woken.set()

    async def _retry(self) -> None:
        delay, began = FIRST_RETRY, time.monotonic()
        while self.pending and self.runtime.running:
            # the wait counts from the last attempt's start: one that hung for a while
            # (a pool waiting for a connection) is followed by the next at once
            await wait_event(self._woken, max(0.0, began + delay - time.monotonic()))
            self._woken.clear()
            began = time.monotonic()
            for name in sorted(self.pending, key=lambda n: self.pending[n].request.slot):
                unknown = self.pending[name]
                try:
                    attempt = await self.runtime.backend.confirm(unknown.request)
                except Exception:
                    delay = min(delay * 2, LONGEST_RETRY)
                    break  # still down: every other pending claim would fail as well
                if self.pending.get(name) is unknown:
                    del self.pending[name]
                await self._decide(unknown, attempt)
            else:
                delay = FIRST_RETRY

    async def _decide(self, unknown: Unknown, attempt: int) -> None:
        runtime, job, request = self.runtime, unknown.job, unknown.request
        if attempt:
            lease = runtime.options.lease
            if time.monotonic() - unknown.sent_at < lease / 2:
                self.claims.claimed(job, request, "won", attempt, unknown.sent_at)
            elif (keeper := self.keeper()) is not None:
                # won, but too long ago to trust the lease: its backups (this instance
                # among them) take it over when the lease is seen expired
                keeper.watch(RunKey(job.name, request.slot))
            return
        current = runtime.jobs.get(job.name)
        if current is None or request.reason not in ("scheduled", "catch-up"):
            return
        following = current.schedule.next_after(request.slot)
        if following is not None and runtime.now_ms() >= request.slot + RECOVER_WITHIN * (
                following - request.slot):
            logger.debug("job %r slot %s: its claim was lost in a store outage and its "
                         "next slot is near; the slot is missed", job.name, request.slot)
            self._missed(current, request.slot)
            return
        key = RunKey(job.name, request.slot)
        self._reclaimed.add(key)
        if len(self._reclaimed) > 1000:
            self._reclaimed = {key}
        logger.info("job %r slot %s: its claim was lost in a store outage; claiming it "
                    "again (runs if still within max_late)", job.name, request.slot)
        # the store refuses it (late) if it is applied after the recovery window (a
        # claim that waited for a lock): never a run next to the job's next slot
        window = request.max_late_ms if following is None else min(
            request.max_late_ms, int(RECOVER_WITHIN * (following - request.slot)))
        await self.claims.claim_and_run(current, request.slot, "catch-up",
                                         version=request.version, catch_up_ms=window)


__all__ = ["Recovery"]
