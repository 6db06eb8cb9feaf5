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
from typing import TYPE_CHECKING, Any

from .backends.base import HeldRun, LeaseBackend, RunKey
from .context import AbortSignal, RunContext
from .durations import to_ms
from .finishing import build_finish, describe, status_of
from .history import RunReason
from .jobs import Job, merge_data
from .lease import Held, LeaseKeeper
from .leasethread import LeaseThread
from .outcomes import call_bound, record_outcome
from .runner import Outcome, run_handler
from .slots import ms_to_datetime
from .stall import LoopWatchdog

if TYPE_CHECKING:
    from .engine import AsyncScheduler

logger = logging.getLogger("anarchon")


class Attempts:
    """The runs executing on one scheduler and everything that happens to them."""

    def __init__(self, host: AsyncScheduler) -> None:
        self.host = host
        #: every run executing here, leased or not (the lease keeper shares this table)
        self.runs: dict[RunKey, Held] = {}
        self.keeper: LeaseKeeper | None = None
        self.lease_thread: LeaseThread | None = None
        self._async_started: dict[str, float] = {}  # async job -> when it last started

    def keep_leases(self, backend: LeaseBackend) -> LeaseKeeper:
        """Create the lease keeper that renews the leases of ``runs``."""
        host = self.host
        clone = backend.lease_clone()
        self.keeper = LeaseKeeper(
            clone or backend, host.instance_id, host.options.lease, host.options.heartbeat,
            on_lost=self.lost, on_expired=host._expired,
            on_error=lambda exc: host._emit("error", None, error=exc), runs=self.runs,
        )
        self.lease_thread = LeaseThread(self.keeper, clone) if clone is not None else None
        return self.keeper

    async def start_leases(self) -> None:
        """Start renewing: on the lease thread if the backend has a clone, else here."""
        assert self.keeper is not None
        if self.lease_thread is not None:
            await self.lease_thread.start()
        else:
            self.host._spawn(self.keeper.run())

    async def stop_leases(self) -> None:
        """End the lease thread (the keeper's task here ends with the other tasks)."""
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
        # stop() waits for the run through host._runs; nothing waits here (cheaper)
        self.host._spawn(self._perform(job, held, reason), self.host._runs)

    async def _perform(self, job: Job, held: Held, reason: RunReason) -> None:
        host, run, signal = self.host, held.run, held.signal
        try:
            if host._stopping:  # won while stopping: hand it straight over
                signal.abort("stop")
                self._drop(run)
                await self._hand_over(job, run)
                return
            outcome, ctx = await self.invoke(job, run.slot, run.attempt, reason, signal, None)
            if host._closed or signal.reason == "lost":
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

    def _drop(self, run: HeldRun) -> None:
        if self.keeper is not None:
            self.keeper.drop(run.key)

    async def _finish(self, job: Job, run: HeldRun, signal: AbortSignal, reason: RunReason,
                      outcome: Outcome) -> None:
        host = self.host
        if signal.reason == "timeout":
            host._emit("interrupted", job.name, run.slot, run.attempt, "timeout")
        status = status_of(outcome.error)
        finish = build_finish(job.name, run.slot, host.instance_id, run.attempt, status,
                              describe(outcome.error), history_size=job.history_size,
                              history_ttl=job.history_ttl, retain_runs_ms=job.retain_runs_ms)
        recorded = await record_outcome(
            host.backend, host._calls.finish, finish, call_bound(host.options.lease),
            on_error=lambda exc: host._emit("error", job.name, run.slot, error=exc),
            closed=lambda: host._closed)
        if recorded is not None:
            host.outage.answered()
        if recorded is False:
            signal.abort("lost")
            host._emit("lost", job.name, run.slot, run.attempt, "lost")
        elif recorded:
            host._emit(status, job.name, run.slot, run.attempt, reason, outcome.error)

    async def _detach(self, job: Job, run: HeldRun, lease: float) -> None:
        """Extend the lease of a detached run; whoever holds its token finishes it."""
        backend = self.host.backend
        if isinstance(backend, LeaseBackend):
            # after any renewal in flight (the run is dropped from the keeper already)
            def extend(store: LeaseBackend) -> Any:
                return store.heartbeat(self.host.instance_id, [run], [], to_ms(lease))

            result = await self._store(job, self.keeper.exclusive(extend) if self.keeper
                                       else extend(backend))
            # "lost" here is no news: the worker may already have finished it
            if result is not None and run.key not in result.lost and self.keeper is not None:
                self.keeper.watch(run.key)  # if nobody finishes it, take it over

    async def _hand_over(self, job: Job, run: HeldRun) -> None:
        backend = self.host.backend
        assert isinstance(backend, LeaseBackend)
        if await self._store(job, backend.release(self.host.instance_id, run)):
            self.host._emit("interrupted", job.name, run.slot, run.attempt, "stop")

    async def _store(self, job: Job, operation: Any) -> Any:
        try:
            return await operation
        except Exception as exc:
            self.host._emit("error", job.name, error=exc)
            return None

    async def invoke(self, job: Job, slot: int, attempt: int, reason: RunReason,
                     signal: AbortSignal, data: Any, manual: bool = False
                     ) -> tuple[Outcome, RunContext | None]:
        """Call the handler of ``job`` for one attempt; its outcome and context."""
        host = self.host
        levels = [host.options.defaults.get("data"), job.data]
        if manual and data is not None:
            levels.append(data)
        host._emit("start", job.name, slot, attempt, reason)
        try:
            run_data = merge_data(levels)
        except Exception as exc:
            return Outcome(exc, False), None
        ctx = RunContext(job.name, slot, ms_to_datetime(slot), host.instance_id, manual,
                         attempt, reason, signal, run_data, job.params)
        if job.is_async:
            self._async_started[job.name] = time.monotonic()
        return await run_handler(job, ctx), ctx

    def lost(self, held: Held) -> None:
        """The keeper found the lease of ``held`` lost: abort the handler."""
        if held.signal.abort("lost"):
            run = held.run
            logger.warning("job %r slot %s attempt %d: lease lost, aborting", run.name,
                           run.slot, run.attempt)
            self.host._emit("interrupted", run.name, run.slot, run.attempt, "lost")
            self.host._emit("lost", run.name, run.slot, run.attempt, "lost")

    def lease_remaining(self, name: str, slot: int, attempt: int | None) -> float | None:
        """See ``anarchon.engine.AsyncScheduler.lease_remaining()``."""
        keeper = self.keeper
        if keeper is None:
            return None
        held = keeper.renewed(RunKey(name, slot))
        if held is None or (attempt is not None and held.run.attempt != attempt):
            return 0.0
        return held.renewed_at + keeper.lease - time.monotonic()

    def _async_busy(self, since: float) -> list[str]:
        """Async jobs started after ``since`` or running with a lease: the likely blockers
        of the loop (read from the watchdog's thread too: copies, never iterates live)."""
        jobs = self.host._jobs
        recent = {name for name, at in list(self._async_started.items()) if at >= since}
        return sorted(recent | {k.name for k, held in list(self.runs.items())
                                if held.renewing and k.name in jobs and jobs[k.name].is_async})

    async def watch_loop_lag(self) -> None:
        """Warn when async handlers block the loop longer than a heartbeat: while it
        happens (a watchdog thread) and once it is over (with the measured lag)."""
        heartbeat = self.host.options.heartbeat
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
