"""The planner: one task that claims every job's slots as they fall due.

It keeps the plan (``anarchon.engine.plan.Plan``: each job's next slot, plus its claim
delay), sleeps until the earliest entry (or until a job is planned earlier), then plans
each due job's next slot and hands the due slots to the claims: one batched call where
the store allows it, else one claim each. Paused slots are skipped without asking the
store.
"""

from __future__ import annotations

import asyncio
import logging

from ..control.controls import Controls
from ..jobs.definition import Job
from .batcher import StoreCalls
from .claims import Claims
from .plan import Alarm, Due, Plan, claim_delay_ms
from .runtime import Runtime

logger = logging.getLogger("anarchon")

#: longest sleep of the planner: a wall-clock step (NTP) is noticed within this (seconds)
MAX_NAP = 30.0


class Planner:
    """Plans and claims the slots of one scheduler's jobs (``runtime.jobs``)."""

    def __init__(self, runtime: Runtime, controls: Controls, claims: Claims,
                 calls: StoreCalls) -> None:
        self.runtime = runtime
        #: pauses and control versions, as this instance applied them
        self.controls = controls
        #: where due slots go (and paused ones are counted)
        self.claims = claims
        #: whether claims are batched, and the claim grid that lets them be
        self.calls = calls
        #: every job's next slot; the planner sleeps until the first
        self.plan = Plan()
        #: the planner's sleep, ended early when a job is planned before its wake-up
        self.alarm = Alarm(runtime.clock)
        self.task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Start the planning task (on the scheduler's loop)."""
        self.task = self.runtime.spawn(self.run())

    def stop(self) -> None:
        """Cancel the planning task: no slot is claimed from now on."""
        if self.task is not None:
            self.task.cancel()

    def schedule(self, job: Job, after_ms: int | None = None) -> None:
        """Plan ``job``'s slots after ``after_ms`` (default: now)."""
        start = self.runtime.now_ms() if after_ms is None else after_ms
        slot = job.schedule.next_after(start)
        if slot is None:
            self.plan.remove(job.name)
        elif self.plan.put(self._due(job, slot)):
            self.alarm.wake()  # due before the planner's wake-up: wake it now

    def unplan(self, name: str) -> None:
        """Forget job ``name``'s planned slot."""
        self.plan.remove(name)

    def _due(self, job: Job, slot: int) -> Due:
        following = job.schedule.next_after(slot)
        return Due(slot + claim_delay_ms(job, slot, following, self.calls.grid_ms),
                   job.name, slot, following, self.controls.version(job.name))

    async def run(self) -> None:
        """Claim every job's slots as they fall due: one task for all jobs, asleep until
        the earliest entry of the plan (or until a job is planned earlier)."""
        plan, now_ms = self.plan, self.runtime.now_ms
        while True:
            due = plan.pop_due(now_ms())
            if due:
                self._claim_due(due)
            at = plan.next_at()
            if at is None:
                await self.alarm.sleep(None)
            elif (wait := (at - now_ms()) / 1000) > 0:
                await self.alarm.sleep(min(wait, MAX_NAP))
            else:
                await asyncio.sleep(0)  # more is due already (the clock jumped): let others run

    def _claim_due(self, due: list[Due]) -> None:
        """Plan each job's next slot and claim the slots that fell due."""
        runtime, controls, claims = self.runtime, self.controls, self.claims
        wanted: list[tuple[Job, int, int]] = []
        for entry in due:
            job = runtime.jobs.get(entry.name)
            if job is None:
                continue
            self._follow(job, entry)
            if controls.holds_back(job.name, entry.slot):
                claims.paused(job, entry.slot)
            else:
                wanted.append((job, entry.slot,
                               controls.claim_version(job.name, entry.version)))
        if not wanted:
            return
        if self.calls.batched:  # one store call for all of them
            runtime.spawn(claims.claim_together(wanted))
        else:
            for job, slot, version in wanted:
                runtime.spawn(claims.claim_and_run(job, slot, "scheduled", version=version))

    def _follow(self, job: Job, entry: Due) -> None:
        """Plan the slot after ``entry`` (the job's entry that just fell due)."""
        try:
            if entry.following is None:
                self.plan.remove(job.name)
            else:
                self.plan.follow(self._due(job, entry.following))
        except Exception as exc:  # one broken schedule must not stop the others
            logger.exception("job %r: cannot plan the slot after %s; no more slots are "
                             "planned for it", job.name, entry.slot)
            self.plan.remove(job.name)
            self.runtime.emit("error", job.name, entry.slot, error=exc)


__all__ = ["MAX_NAP", "Planner"]
