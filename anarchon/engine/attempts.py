"""The life of one attempt on this instance: execute, perform, finish, detach, hand over,
lose.

``Attempts`` is the one owner of run state: its table ``runs`` holds every run
executing here, leased or not. The lease keeper (``LeaseKeeper``)
renews the entries of that same table that are still ``renewing``; it keeps no table of
its own. The engine claims slots and hands each won attempt to ``Attempts.execute()``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from ..backends.base import HeldRun, LeaseBackend, RunKey, RunState
from ..context import AbortSignal, RunContext
from ..durations import to_ms
from ..history import RunReason, RunRecord
from ..jobs.definition import Job, merge_data
from ..schedules.kinds import ms_to_datetime
from .batcher import StoreCalls
from .finish_records import build_finish, describe, status_of
from .lease_keeper import Held, LeaseKeeper
from .lease_thread import LeaseThread
from .outcome_writes import call_bound, record_outcome
from .runner import Outcome, run_handler
from .runtime import Runtime
from .watchdog import LoopWatchdog

#: claims a slot again as a scheduled claim: ``reclaim(job, slot)``
Reclaim = Callable[[Job, int], Awaitable[None]]

logger = logging.getLogger("anarchon")


class Attempts:
    """The runs executing on one scheduler and everything that happens to them."""

    def __init__(self, runtime: Runtime, calls: StoreCalls,
                 expired: Callable[[RunState], None], reclaim: Reclaim) -> None:
        self.runtime = runtime
        #: the store calls, batched where the backend can (finishes go through them)
        self.calls = calls
        #: called with a watched run whose lease expired (it is taken over)
        self.expired = expired
        #: claims again a slot whose run the store forgot
        self.reclaim = reclaim
        #: every run executing here, leased or not (the lease keeper shares this table)
        self.runs: dict[RunKey, Held] = {}
        self.keeper: LeaseKeeper | None = None
        self.lease_thread: LeaseThread | None = None
        self._async_started: dict[str, float] = {}  # async job -> when it last started
        #: slots claimed again after the store forgot their run (once each)
        self._reclaimed: set[RunKey] = set()

    def keep_leases(self, backend: LeaseBackend) -> LeaseKeeper:
        """Create the lease keeper that renews the leases of ``runs``."""
        runtime = self.runtime
        clone = backend.lease_clone()
        self.keeper = LeaseKeeper(
            clone or backend, runtime.instance_id, runtime.options.lease,
            runtime.options.heartbeat, on_lost=self.lost, on_expired=self.expired,
            on_error=lambda exc: runtime.emit("error", None, error=exc), runs=self.runs,
        )
        self.lease_thread = LeaseThread(self.keeper, clone) if clone is not None else None
        return self.keeper

    async def start_leases(self) -> None:
        """Start renewing: on the lease thread if the backend has a clone, else here."""
        assert self.keeper is not None
        if self.lease_thread is not None:
            await self.lease_thread.start()
        else:
            self.runtime.spawn(self.keeper.run())

    async def stop_leases(self) -> None:
        """Remove the liveness record, then end the lease thread (the keeper's task here
        ends with the other tasks)."""
        if self.keeper is not None:
            await self.keeper.leave()
        if self.lease_thread is not None:
            await self.lease_thread.stop()

    def abort_all(self) -> None:
        """Abort the signal of every run executing here: the scheduler stops."""
        for held in list(self.runs.values()):
            held.signal.abort("stop")

    def execute(self, job: Job, slot: int, attempt: int, reason: RunReason,
                claimed_at: float) -> None:
        """Run attempt ``attempt`` of ``(job, slot)``, won by a claim sent at ``claimed_at``."""
        held = Held(HeldRun(job.name, slot, attempt), AbortSignal(), claimed_at)
        self.runs[held.run.key] = held
        if self.keeper is not None:
            self.keeper.hold(held)
        # stop() waits for the run (a run task); nothing waits here (cheaper)
        self.runtime.tasks.run(self._perform(job, held, reason))

    async def _perform(self, job: Job, held: Held, reason: RunReason) -> None:
        runtime, run, signal = self.runtime, held.run, held.signal
        try:
            if runtime.tasks.stopping:  # won while stopping: hand it straight over
                signal.abort("stop")
                self._drop(run)
                await self._hand_over(job, run)
                return
            outcome, ctx = await self.invoke(job, run.slot, run.attempt, reason, signal, None)
            if runtime.tasks.stopped or signal.reason == "lost":
                return
            if ctx is not None and ctx.detached_lease is not None and outcome.error is None:
                self._drop(run)  # the detach write sets the lease from now on
                await self._detach(job, run, ctx.detached_lease)
                return
            if signal.reason == "stop" and outcome.raised_on_abort and self.keeper:
                self._drop(run)  # a renewal after the release would delay the backup
                await self._hand_over(job, run)
                return
            held.finishing = True  # keep renewing until the outcome is recorded
            await self._finish(job, run, signal, reason, outcome)
        finally:
            self._drop(run)
            if self.runs.get(run.key) is held:
                del self.runs[run.key]
            if held.vanished and held.told_lost:
                self.runtime.spawn(self._reclaim(job, run))

    async def _reclaim(self, job: Job, run: HeldRun) -> None:
        """The store forgot run ``run`` (its handler has stopped): decide its slot again
        with a fresh claim, judged like a scheduled one (refused as ``late`` after
        ``max_late``, one winner cluster-wide). Once per slot and process."""
        key = run.key
        if key in self._reclaimed or (current := self.runtime.jobs.get(job.name)) is None:
            return
        self._reclaimed.add(key)
        if len(self._reclaimed) > 1000:
            self._reclaimed = {key}
        await self.reclaim(current, run.slot)

    def _drop(self, run: HeldRun) -> None:
        if self.keeper is not None:
            self.keeper.drop(run.key)

    async def _finish(self, job: Job, run: HeldRun, signal: AbortSignal, reason: RunReason,
                      outcome: Outcome) -> None:
        runtime = self.runtime
        if signal.reason == "timeout":
            runtime.emit("interrupted", job.name, run.slot, run.attempt, "timeout")
        status = status_of(outcome.error)
        finish = build_finish(job.name, run.slot, runtime.instance_id, run.attempt, status,
                              describe(outcome.error), history_size=job.history_size,
                              history_ttl=job.history_ttl, retain_runs_ms=job.retain_runs_ms)
        recorded = await record_outcome(
            runtime.backend, self.calls.finish, finish, call_bound(runtime.options.lease),
            on_error=lambda exc: runtime.emit("error", job.name, run.slot, error=exc),
            closed=lambda: runtime.tasks.stopped)
        if recorded is not None:
            runtime.events.outage.answered()
        if recorded is False:
            signal.abort("lost")
            runtime.emit("lost", job.name, run.slot, run.attempt, "lost")
        elif recorded:
            runtime.emit(status, job.name, run.slot, run.attempt, reason, outcome.error)

    async def _detach(self, job: Job, run: HeldRun, lease: float) -> None:
        """Extend the lease of a detached run; whoever holds its token finishes it."""
        backend = self.runtime.backend
        if isinstance(backend, LeaseBackend):
            # after any renewal in flight (the run is dropped from the keeper already)
            def extend(store: LeaseBackend) -> Any:
                return store.heartbeat(self.runtime.instance_id, [run], [], to_ms(lease))

            result = await self._store(job, self.keeper.exclusive(extend) if self.keeper
                                       else extend(backend))
            # "lost" here is no news: the worker may already have finished it
            if result is not None and run.key not in result.lost and self.keeper is not None:
                self.keeper.watch(run.key)  # if nobody finishes it, take it over

    async def _hand_over(self, job: Job, run: HeldRun) -> None:
        backend = self.runtime.backend
        assert isinstance(backend, LeaseBackend)
        if await self._store(job, backend.release(self.runtime.instance_id, run)):
            self.runtime.emit("interrupted", job.name, run.slot, run.attempt, "stop")

    async def _store(self, job: Job, operation: Any) -> Any:
        try:
            return await operation
        except Exception as exc:
            self.runtime.emit("error", job.name, error=exc)
            return None

    async def invoke(self, job: Job, slot: int, attempt: int, reason: RunReason,
                     signal: AbortSignal, data: Any, manual: bool = False
                     ) -> tuple[Outcome, RunContext | None]:
        """Call the handler of ``job`` for one attempt; its outcome and context."""
        runtime = self.runtime
        levels = [runtime.options.defaults.get("data"), job.data]
        if manual and data is not None:
            levels.append(data)
        runtime.emit("start", job.name, slot, attempt, reason)
        try:
            run_data = merge_data(levels)
        except Exception as exc:
            return Outcome(exc, False), None
        ctx = RunContext(job.name, slot, ms_to_datetime(slot), runtime.instance_id, manual,
                         attempt, reason, signal, run_data, job.params)
        if job.is_async:
            self._async_started[job.name] = time.monotonic()
        return await run_handler(job, ctx), ctx

    async def run_manual(self, job: Job, data: Any) -> RunRecord:
        """Run ``job`` here and now (no claim, no lease, no retry), recorded as
        ``manual``: ``run_now()``."""
        runtime, name, here = self.runtime, job.name, self.runtime.instance_id
        started = runtime.now_ms()
        token = await runtime.backend.start_manual(name, here, started)
        outcome, _ = await self.invoke(job, started, 1, "manual", AbortSignal(), data,
                                       manual=True)
        status = status_of(outcome.error)
        finish = build_finish(name, started, here, 1, status, describe(outcome.error),
                              history_size=job.history_size, history_ttl=job.history_ttl,
                              retain_runs_ms=job.retain_runs_ms)
        await runtime.backend.finish_manual(token, finish.status, finish.error,
                                            finish.history_size, finish.history_ttl_ms)
        runtime.emit(status, name, started, 1, "manual", outcome.error)
        finished = runtime.now_ms()
        return RunRecord(name, started, ms_to_datetime(started), here, True, 1, "manual",
                         finish.status, ms_to_datetime(started), ms_to_datetime(finished),
                         (finished - started) / 1000, finish.error)

    def lost(self, held: Held) -> None:
        """The keeper found the lease of ``held`` lost (the store said so, or its local
        deadline passed: then the keeper's timer aborted the signal already): abort the
        handler and say so, once."""
        aborted_now = held.signal.abort("lost")
        if held.told_lost or not (aborted_now or held.signal.reason == "lost"):
            return  # told already, or it had stopped for another reason first
        held.told_lost = True
        run = held.run
        if held.vanished:
            logger.warning("job %r slot %s attempt %d: the store has no record of this run "
                           "(a failover to a replica that was behind, a flush or a "
                           "restore); aborting it, and claiming the slot again once it "
                           "has stopped (runs if still within max_late)", run.name,
                           run.slot, run.attempt)
        else:
            logger.warning("job %r slot %s attempt %d: lease lost, aborting", run.name,
                           run.slot, run.attempt)
        self.runtime.emit("interrupted", run.name, run.slot, run.attempt, "lost")
        self.runtime.emit("lost", run.name, run.slot, run.attempt, "lost")

    def lease_remaining(self, name: str, slot: int, attempt: int | None) -> float | None:
        """See ``anarchon.engine.scheduler.AsyncScheduler.lease_remaining()``."""
        keeper = self.keeper
        if keeper is None:
            return None
        held = keeper.renewed(RunKey(name, slot))
        if held is None or (attempt is not None and held.run.attempt != attempt):
            return 0.0
        return keeper.deadlines.deadline(held) - time.monotonic()

    def _async_busy(self, since: float) -> list[str]:
        """Async jobs started after ``since`` or running with a lease: the likely blockers
        of the loop (read from the watchdog's thread too: copies, never iterates live)."""
        jobs = self.runtime.jobs
        recent = {name for name, at in list(self._async_started.items()) if at >= since}
        return sorted(recent | {k.name for k, held in list(self.runs.items())
                                if held.renewing and k.name in jobs and jobs[k.name].is_async})

    async def watch_loop_lag(self) -> None:
        """Warn when async handlers block the loop longer than a heartbeat: while it
        happens (a watchdog thread) and once it is over (with the measured lag)."""
        heartbeat = self.runtime.options.heartbeat
        step = heartbeat / 4
        dog = LoopWatchdog(heartbeat, lambda: self._async_busy(time.monotonic() - 60))
        dog.start()
        try:
            while True:
                before = time.monotonic()
                dog.turned()
                await asyncio.sleep(step)
                dog.turned()
                lag = time.monotonic() - before - step
                now = time.monotonic()
                busy = self._async_busy(before - step)
                self._async_started = {n: at for n, at in self._async_started.items()
                                       if at >= now - 60}
                if lag > heartbeat:
                    logger.warning("event loop blocked (or the process paused) for %.1fs "
                                   "(heartbeat %gs): heartbeats were late; async job(s) "
                                   "running: %s — use await or a thread for blocking work",
                                   lag, heartbeat, ", ".join(busy) or "none")
        finally:
            dog.stop()
