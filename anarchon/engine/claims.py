"""Claims: asking the store who runs a slot, and acting on its answer.

Scheduled claims come from the planner (``anarchon.engine.planner``: one batched call
for the slots due together where the backend allows it); catch-up claims come at start,
takeover claims when a watched run's lease expired or its owner handed it over. A claim
whose answer was lost is confirmed before anything runs, and decided again once the
store answers (``anarchon.engine.recovery``). A won claim goes to
``anarchon.engine.attempts.Attempts.execute()``.
"""

from __future__ import annotations

import asyncio
import logging
import time

from ..backends.base import ClaimReason, ClaimRequest, LeaseBackend, RunKey, RunState
from ..control.controls import Controls
from ..durations import to_ms
from ..jobs.definition import Job
from ..schedules.kinds import AtSchedule
from .attempts import Attempts
from .backlog import Backlog
from .batcher import StoreCalls
from .recovery import Recovery
from .runtime import Runtime
from .skip_records import SkipRecords

logger = logging.getLogger("anarchon")


class Claims:
    """The claims of one scheduler."""

    def __init__(self, runtime: Runtime, controls: Controls, calls: StoreCalls,
                 attempts: Attempts) -> None:
        self.runtime = runtime
        #: pauses and control versions, as this instance applied them
        self.controls = controls
        #: the store calls, batched where the backend can
        self.calls = calls
        #: where a won claim runs; its lease keeper backs up the runs others won
        self.attempts = attempts
        #: the slots given up (counted per job; a warning when claims fall behind)
        self.backlog = Backlog()
        #: the slots given up as late or overlapping, written to history
        self.skip_records = SkipRecords(runtime)
        #: slots refused as ``early`` whose one later claim is pending
        self._early: set[RunKey] = set()
        #: claims whose answer was lost: retried once the store answers
        self.recovery = Recovery(runtime, self, lambda: attempts.keeper)

    async def recover(self) -> None:
        keeper = self.attempts.keeper
        assert isinstance(self.runtime.backend, LeaseBackend) and keeper is not None
        for state in await self.runtime.backend.unfinished(list(self.runtime.jobs)):
            if state.lease_expired:
                self.expired(state)
            else:
                keeper.watch(RunKey(state.name, state.slot))

    async def catch_up(self, now: int) -> None:
        for job in list(self.runtime.jobs.values()):
            if job.catch_up <= 0:
                continue
            slot = job.schedule.latest_at_or_before(now, to_ms(job.catch_up))
            if slot is None:
                continue
            if job.name in self.controls.paused:
                self.paused(job, slot)
            else:
                self.runtime.spawn(self.claim_and_run(job, slot, "catch-up"))

    def paused(self, job: Job, slot: int) -> None:
        """A slot of a paused job: skipped here, without asking the store."""
        self.backlog.skip(job.name, "paused")
        self.runtime.emit("skip", job.name, slot, reason="paused")

    def _request(self, job: Job, slot: int, reason: ClaimReason,
                 expected_attempt: int = 0, version: int | None = None,
                 catch_up_ms: int | None = None) -> ClaimRequest:
        return ClaimRequest(
            name=job.name, slot=slot, owner=self.runtime.instance_id, reason=reason,
            lease_ms=to_ms(self.runtime.options.lease), max_late_ms=to_ms(job.max_late),
            max_attempts=job.max_attempts, overlap=job.overlap,
            catch_up_ms=to_ms(job.catch_up) if catch_up_ms is None else catch_up_ms,
            expected_attempt=expected_attempt,
            version=self.controls.version(job.name) if version is None else version,
            one_off=reason == "catch-up" and isinstance(job.schedule, AtSchedule),
        )

    async def claim_and_run(self, job: Job, slot: int, reason: ClaimReason,
                             expected_attempt: int = 0, version: int | None = None,
                             catch_up_ms: int | None = None) -> None:
        if not self.runtime.running:
            return
        request = self._request(job, slot, reason, expected_attempt, version, catch_up_ms)
        sent_at = time.monotonic()
        try:
            result = await self.calls.claim(request)
        except Exception as exc:
            await self._claim_unknown(job, request, exc, sent_at)
        else:
            self.claimed(job, request, result.outcome, result.attempt, sent_at,
                         result.store_ms)

    def expired(self, state: RunState) -> None:
        """A watched run's lease expired, or its owner handed it over: take it over
        (right after a store outage, the runner first gets a lease to renew or finish)."""
        runtime = self.runtime
        job = runtime.jobs.get(state.name)
        if job is not None and runtime.running:
            wait = 0.0 if state.handed_over else runtime.events.outage.settling(
                runtime.options.lease)
            runtime.spawn(self.take_over(job, state.slot, state.attempt, wait))

    async def take_over(self, job: Job, slot: int, attempt: int, wait: float) -> None:
        """Claim a run whose lease expired (after ``wait`` seconds, if any)."""
        if wait > 0:
            await asyncio.sleep(wait)
        await self.claim_and_run(job, slot, "takeover", attempt)

    async def claim_together(self, claims: list[tuple[Job, int, int]]) -> None:
        """Claim slots that fell due together in as few store calls as the backend
        allows ([`Backend.claim_many()`][anarchon.backends.base.Backend.claim_many]), then act on
        each answer."""
        if not self.runtime.running:
            return
        requests = [self._request(job, slot, "scheduled", version=version)
                    for job, slot, version in claims]
        sent_at = time.monotonic()
        answers = await self.calls.claim_all(requests)
        for (job, _, _), request, answer in zip(claims, requests, answers, strict=True):
            if isinstance(answer, Exception):
                self.runtime.spawn(self._claim_unknown(job, request, answer, sent_at))
            else:
                self.claimed(job, request, answer.outcome, answer.attempt, sent_at,
                             answer.store_ms)

    async def _claim_unknown(self, job: Job, request: ClaimRequest, error: Exception,
                             sent_at: float) -> None:
        """The claim failed and may or may not have been written: run only if the store
        shows we own it."""
        self.runtime.emit("error", job.name, request.slot, error=error)
        try:
            attempt = await self.runtime.backend.confirm(request)
        except Exception as exc:
            self.runtime.emit("error", request.name, request.slot, error=exc)
            attempt = 0
        if attempt:
            self.claimed(job, request, "won", attempt, sent_at)
        else:  # not written, or unknown: decided again once the store answers
            self.recovery.add(job, request, sent_at)

    def claimed(self, job: Job, request: ClaimRequest, outcome: str, attempt: int,
                 sent_at: float, store_ms: int | None = None) -> None:
        """Act on the store's answer (given at ``store_ms``, if known) to a claim: run
        it, back it up, or skip it (counting a slot given up as late or overlapping)."""
        slot, reason = request.slot, request.reason
        self.runtime.events.outage.answered()
        self.recovery.wake()
        if outcome == "won":
            self.attempts.execute(job, slot, attempt, reason, sent_at)
        elif outcome == "early":
            self._early_answer(job, request, store_ms)
        elif outcome == "stale":
            self.runtime.spawn(self._stale(job, request))
        elif outcome == "exhausted":
            logger.warning("job %r slot %s: max_attempts (%d) reached; run left interrupted",
                           job.name, slot, job.max_attempts)
        elif outcome == "taken":
            keeper = self.attempts.keeper
            if keeper is not None:  # back it up (a lost takeover too: attempt 3 …)
                keeper.watch(RunKey(job.name, slot))
            # a slot another instance runs is skipped here, scheduled or caught up (a
            # takeover lost to another backup skips no slot)
            if reason != "takeover":
                self.runtime.emit("skip", job.name, slot, reason=outcome)
        elif (outcome == "late" and reason == "scheduled") or (
                outcome == "overlap" and reason != "takeover"):
            if outcome == "late":
                self.backlog.late(job.name, slot, store_ms)
                self.skip_records.add(job, slot, "late")
            else:
                self.backlog.skip(job.name, outcome)
                self.skip_records.add(job, slot, "overlap")
            self.runtime.emit("skip", job.name, slot, reason=outcome)

    async def _stale(self, job: Job, request: ClaimRequest) -> None:
        """The store holds a newer control record than the claim was planned from: read
        the records, then claim the slot once more if the new definition still has it."""
        controls = self.controls
        try:
            await controls.refresh()
        except Exception as exc:
            self.runtime.emit("error", job.name, request.slot, error=exc)
            return
        current = self.runtime.jobs.get(job.name)
        version = controls.version(job.name)
        held_back = controls.holds_back(job.name, request.slot)
        if current is None or version <= request.version or held_back \
                or current.schedule.next_after(request.slot - 1) != request.slot:
            logger.debug("job %r slot %s: planned from control version %d, the store has "
                         "%d; not a slot of the job now", job.name, request.slot,
                         request.version, version)
            if current is not None and held_back:
                self.paused(current, request.slot)
            return
        await self.claim_and_run(current, request.slot, request.reason,
                                 request.expected_attempt, version)

    def _early_answer(self, job: Job, request: ClaimRequest, store_ms: int | None) -> None:
        """The store's clock says the slot has not come (this instance's clock runs
        ahead): claim it once more when the store's clock reaches it; refused again, the
        slot is left to the other instances."""
        key = RunKey(job.name, request.slot)
        if key in self._early or store_ms is None:
            logger.warning("job %r slot %s: refused twice as early by the store's clock; "
                           "is this instance's clock ahead?", job.name, request.slot)
            self.backlog.skip(job.name, "early")
            self.runtime.emit("skip", job.name, request.slot, reason="early")
            return
        self._early.add(key)
        delay = max(0, request.slot - store_ms) / 1000
        self.runtime.spawn(self._claim_later(job, request, key, delay))

    async def _claim_later(self, job: Job, request: ClaimRequest, key: RunKey,
                           delay: float) -> None:
        try:
            await asyncio.sleep(delay)
            await self.claim_and_run(job, request.slot, request.reason,
                                     request.expected_attempt, request.version)
        finally:
            self._early.discard(key)
