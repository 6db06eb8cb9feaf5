"""AsyncScheduler: the one engine. Plans slots, claims them, runs and records them."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from .aio import cancel_and_wait
from .attempts import Attempts
from .backends.base import (
    Backend,
    JobSpec,
    LeaseBackend,
    RunKey,
    RunState,
    Wakeup,
)
from .backends.trigger_rules import trigger_ttl_for
from .batching import StoreCalls
from .changing import RuntimeControl
from .claiming import Claims
from .clock import SYSTEM_CLOCK, Clock
from .context import AbortSignal
from .controlling import Controls
from .durations import DurationLike, parse_duration
from .events import Event, EventType, Listener, Listeners
from .finishing import build_finish, describe, status_of
from .history import RunRecord
from .jobs import Job, resolve_instance_id, warn_if_past
from .lease import LeaseKeeper
from .outage import OutageLog
from .planning import Alarm, Due, Plan, claim_delay_ms
from .planning import jitter_cap_ms as jitter_cap_ms
from .reaching import StoreWait, serve
from .refreshing import RegistrationRefresh
from .registering import JobRegistry
from .requesting import TriggerCalls
from .slots import ms_to_datetime
from .triggers import SAFETY_POLL as SAFETY_POLL
from .triggers import TriggerInbox

logger = logging.getLogger("anarchon")

#: with a backend that batches claims, each job's jitter is rounded up to this grid (never
#: beyond the job's ``jitter``) so that jobs due within the same 20 ms wake and claim
#: together: one store call per step. Measured at 1,000 jobs/s on 3 instances: a 5 ms
#: grid cost ~60 % more CPU (4x the calls) and gave no lower start delays
CLAIM_GRID_MS = 20.0
#: a batch of finishes (or of catch-up and takeover claims) is sent this long after its
#: first item; 0: on the next loop turn
BATCH_WINDOW_S = 0.0
#: longest sleep of the planner: a wall-clock step (NTP) is noticed within this (seconds)
MAX_NAP = 30.0
#: records ``last_run()`` reads to find the newest attempt among skip records
LAST_RUN_LOOKBACK = 50


class AsyncScheduler(RuntimeControl, TriggerCalls, JobRegistry):
    """Runs jobs on an asyncio event loop; use ``async with`` or ``start()``/``stop()``.

    ``backend`` is required (there is no implicit store). Options are those of
    docs/contract.md (*Options*):
    ``lease``, ``heartbeat`` and defaults for every job (``jitter``, ``max_late``,
    ``timeout``, ``timezone``, ``history_size``, ``history_ttl``, ``data`` …).
    ``instance_id`` defaults to ``host:pid:random``; ``clock`` is injectable for tests.
    """

    def __init__(self, backend: Backend | None = None, *, instance_id: str | None = None,
                 clock: Clock | None = None, **options: Any) -> None:
        if backend is None:
            raise TypeError(
                "Scheduler needs a backend, e.g. Scheduler(backend=SqliteBackend("
                "database='./jobs.db')) or RedisBackend(redis='redis://localhost:6379'); "
                "anarchon has no implicit store"
            )
        if not isinstance(backend, Backend):
            raise TypeError(f"backend must be an anarchon Backend, got {backend!r}")
        super().__init__(backend, options)
        if backend.trigger_ttl is None:  # the life of manual-run requests (trigger_rules)
            backend.trigger_ttl = trigger_ttl_for(self.options.lease)
        self.instance_id = resolve_instance_id(instance_id)
        self.clock = clock or SYSTEM_CLOCK
        self._listeners = Listeners()
        self.outage = OutageLog()  # what the log says of store errors (not the listeners)
        self._keeper: LeaseKeeper | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        # every job's next slot; one task (the planner) sleeps until the earliest is due
        self._plan = Plan()
        self._planner: asyncio.Task[None] | None = None
        self._alarm = Alarm(self.clock)  # the planner's sleep, ended early by _schedule
        self._runs: set[asyncio.Task[Any]] = set()  # runs (and manual runs) stop() awaits
        self._attempts = Attempts(self)  # owns the table of runs executing here
        self._claiming = Claims(self)
        self._registrations = RegistrationRefresh(self)
        self._controls = Controls(self)  # pauses, overrides and dynamic jobs, as applied
        self._loop: asyncio.AbstractEventLoop | None = None
        # claims and finishes due together go to the store as one call (if it can)
        self._calls = StoreCalls(self.backend, window=BATCH_WINDOW_S, grid_ms=CLAIM_GRID_MS)
        self._claims = self._calls.claims
        # the backend's wake-up channel (Backend.watch): while it is up, triggers and
        # hand-overs arrive as messages and the trigger poll slows to a safety net
        self._inbox = TriggerInbox(self)
        self._opened = False
        self._open_lock = asyncio.Lock()
        self._store_wait = StoreWait(self.backend)  # start(wait=True) until the store answers
        self._started = False
        self._run_stopped: asyncio.Event | None = None  # set by stop() while run() waits
        self._stopping = False
        self._closed = False

    # -- events --------------------------------------------------------------------------

    def on(self, event: EventType, listener: Listener) -> Listener:
        """Call ``listener(event)`` for every event of that type; returns the listener."""
        self._listeners.add(event, listener)
        return listener

    def _emit(self, type_: EventType, name: str | None, slot: int | None = None,
              attempt: int | None = None, reason: str | None = None,
              error: BaseException | None = None) -> None:
        if type_ == "error":
            self.outage.failed(name, error)
        if self._listeners.wants(type_):  # most events have no listener: build nothing
            self._listeners.emit(Event(type_, name, slot, attempt, reason, self.instance_id,
                                       error))

    # -- lifecycle -----------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self._started and not self._stopping

    async def _ensure_open(self) -> None:
        async with self._open_lock:
            if not self._opened:
                await self.backend.open()
                self._opened = True

    async def start(self, wait: bool = False) -> None:
        """Connect, register jobs, recover unfinished runs, catch up, then schedule.

        A store that does not answer raises [`StoreError`][anarchon.errors.StoreError] at
        once, unless ``wait=True``: then the connection is retried with a backoff (0.5 s
        doubling to 10 s) and one WARNING names the store, then one every 30 s, until it
        answers; a ``stop()`` meanwhile makes ``start()`` return without starting.
        """
        if self._started:
            raise RuntimeError("scheduler already started")
        if self._closed or self._stopping:
            raise RuntimeError("a stopped scheduler cannot be started again; create a new one")
        self._loop = asyncio.get_running_loop()
        if wait:
            if not await self._store_wait.until(self._connect) or self._stopping:
                return
        else:
            await self._connect()
        self._started = True
        if isinstance(self.backend, LeaseBackend):
            self._keeper = self._attempts.keep_leases(self.backend)
            await self._attempts.start_leases()
            self._spawn(self._attempts.watch_loop_lag())
            await self._claiming.recover()
        # one instant splits the slots: up to it catch-up's, after it the planner's
        # (two readings of the clock would let a slot fall between them, unclaimed)
        split_ms = self._now_ms()
        if self._keeper is not None:
            await self._claiming.catch_up(split_ms)
        for job in list(self._jobs.values()):
            warn_if_past(job, split_ms, self._keeper is not None)
            self._schedule(job, after_ms=split_ms)
        self._planner = self._spawn(self._plan_loop())
        self._spawn(self._registrations.run())
        polled = bool(self._jobs or self._controls.handlers)
        if self.backend.supports_triggers and polled:
            self._spawn(self._inbox.run())
        if polled and (self._keeper is not None or self.backend.supports_triggers):
            self._spawn(self.backend.watch(self._woken))
        logger.info("scheduler %s started with %d job(s) on %s", self.instance_id,
                    len(self._jobs), self.backend.name)

    async def _connect(self) -> None:
        """Open the store and register this instance's jobs: the first calls to answer."""
        await self._ensure_open()
        await self.backend.register([self._spec(job) for job in self._jobs.values()])
        if self._controls.enabled:  # pauses, overrides and dynamic jobs apply from the start
            await self._controls.refresh()
            await self._controls.offer(force=True)
            dynamic = [self._spec(self._jobs[name]) for name in self._controls.dynamic]
            if dynamic:  # known to the store (catch-up) like the code's jobs
                await self.backend.register(dynamic)

    async def run(self, stop_timeout: DurationLike = 30) -> None:
        """``start(wait=True)``, run until SIGINT/SIGTERM (or ``stop()``), then stop
        gracefully and return: the long-running entry point, which outlasts a store that
        is down when it starts. Signals are handled only on the main thread's loop."""
        await serve(self, stop_timeout)

    def _abandon_start(self) -> None:
        """End a ``start(wait=True)`` that is waiting for the store (on the loop)."""
        self._store_wait.abandon()
        if self._run_stopped is not None:
            self._run_stopped.set()

    async def stop(self, timeout: DurationLike = 30) -> None:
        """Stop scheduling, abort running handlers and hand their runs over.

        Waits up to ``timeout`` for handlers; a handler still running then keeps its
        thread but loses its heartbeat, so a backup takes over after the lease expires.
        Nothing is sent to the store after this returns.
        """
        wait = parse_duration(timeout, option="timeout")
        if self._closed or self._stopping:
            return
        self._stopping = True
        self._abandon_start()
        await self._store_wait.ended()
        if self._planner is not None:
            self._planner.cancel()
        if self._keeper is not None:
            self._keeper.unwatch_all()
        self._attempts.abort_all()
        if self._runs:
            _, pending = await asyncio.wait(set(self._runs), timeout=wait)
            if pending:
                logger.warning("%d run(s) outlived stop(timeout=%gs); a backup takes them "
                               "over when their lease expires", len(pending), wait)
                await cancel_and_wait(pending)
        await self._claiming.skip_records.drain()
        self._closed = True
        await cancel_and_wait(list(self._tasks))
        await self._attempts.stop_leases()
        await self._calls.aclose()  # batched calls still in flight are cancelled too
        await self._controls.withdraw()
        if self._opened:
            await self.backend.close()
        logger.info("scheduler %s stopped", self.instance_id)

    async def __aenter__(self) -> AsyncScheduler:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    def _spawn(self, coro: Any, bucket: set[asyncio.Task[Any]] | None = None) -> asyncio.Task[Any]:
        task: asyncio.Task[Any] = asyncio.ensure_future(coro)
        group = self._tasks if bucket is None else bucket
        group.add(task)
        task.add_done_callback(group.discard)
        task.add_done_callback(_log_crash)
        return task

    def _on_loop(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` on the scheduler's loop (jobs may be added from other threads)."""
        try:
            current = asyncio.get_running_loop()
        except RuntimeError:
            current = None
        if self._loop is None or current is self._loop:
            fn()
        else:
            self._loop.call_soon_threadsafe(fn)

    def _job_added(self, job: Job) -> None:
        job = self._jobs[job.name] = self._controls.adopt(job)

        def schedule() -> None:
            if self.running:
                self._spawn(self.backend.register([self._spec(job)]))
                self._schedule(job)

        if self.running:
            self._on_loop(schedule)

    def _job_removed(self, name: str) -> None:
        self._on_loop(lambda: self._plan.remove(name))
        self._claiming.backlog.forget(name)
        self._controls.forget(name)

    @staticmethod
    def _spec(job: Job) -> JobSpec:
        return JobSpec(job.name, job.schedule.kind, job.schedule.describe(), job.framework)

    # -- planning ------------------------------------------------------------------------

    def _now_ms(self) -> int:
        return int(self.clock.time() * 1000)

    def _schedule(self, job: Job, after_ms: int | None = None) -> None:
        """Plan ``job``'s slots after ``after_ms`` (default: now)."""
        slot = job.schedule.next_after(self._now_ms() if after_ms is None else after_ms)
        if slot is None:
            self._plan.remove(job.name)
        elif self._plan.put(self._due(job, slot)):
            self._alarm.wake()  # due before the planner's wake-up: wake it now

    def _due(self, job: Job, slot: int) -> Due:
        following = job.schedule.next_after(slot)
        return Due(slot + claim_delay_ms(job, slot, following, self._calls.grid_ms),
                   job.name, slot, following, self._controls.version(job.name))

    async def _plan_loop(self) -> None:
        """Claim every job's slots as they fall due: one task for all jobs, asleep until
        the earliest entry of the plan (or until a job is planned earlier)."""
        while True:
            due = self._plan.pop_due(self._now_ms())
            if due:
                self._claim_due(due)
            at = self._plan.next_at()
            if at is None:
                await self._alarm.sleep(None)
            elif (wait := (at - self._now_ms()) / 1000) > 0:
                await self._alarm.sleep(min(wait, MAX_NAP))
            else:
                await asyncio.sleep(0)  # more is due already (the clock jumped): let others run

    def _claim_due(self, due: list[Due]) -> None:
        """Plan each job's next slot and claim the slots that fell due."""
        claims: list[tuple[Job, int, int]] = []
        for entry in due:
            job = self._jobs.get(entry.name)
            if job is None:
                continue
            try:
                if entry.following is None:
                    self._plan.remove(job.name)
                else:
                    self._plan.follow(self._due(job, entry.following))
            except Exception as exc:  # one broken schedule must not stop the others
                logger.exception("job %r: cannot plan the slot after %s; no more slots are "
                                 "planned for it", job.name, entry.slot)
                self._plan.remove(job.name)
                self._emit("error", job.name, entry.slot, error=exc)
            if job.name in self._controls.paused:
                self._claiming.paused(job, entry.slot)
            else:
                claims.append((job, entry.slot,
                               self._controls.claim_version(job.name, entry.version)))
        if not claims:
            return
        if self._calls.batched:  # one store call for all of them
            self._spawn(self._claiming.claim_together(claims))
        else:
            for job, slot, version in claims:
                self._spawn(self._claiming.claim_and_run(job, slot, "scheduled",
                                                         version=version))

    def _expired(self, state: RunState) -> None:
        job = self._jobs.get(state.name)
        if job is not None and self.running:
            # right after a store outage the runner gets a lease to renew or finish first
            wait = 0.0 if state.handed_over else self.outage.settling(self.options.lease)
            self._spawn(self._claiming.take_over(job, state.slot, state.attempt, wait))

    # -- claiming and running ------------------------------------------------------------------

    def lease_remaining(self, name: str, slot: int, attempt: int | None = None
                        ) -> float | None:
        """Seconds the lease of run ``(name, slot)`` is known to last on this instance.

        Judged as the lease keeper judges it: on the monotonic clock, from the send time
        of the last renewal (or claim) the store confirmed. A handler about to do
        something that must happen at most once (publish a message) can check it is
        still the owner: a process paused past its lease gets a small or negative value
        until the next heartbeat renews the lease or declares it lost.

        Returns ``None`` when there is no lease to judge (a claim-only backend, or the
        scheduler was not started), ``0.0`` when this instance does not hold the run
        (never claimed here, finished, lost, or ``attempt`` given and not the held one).
        Safe to call from a handler's thread.
        """
        return self._attempts.lease_remaining(name, slot, attempt)

    # -- manual runs and queries ----------------------------------------------------------

    async def run_now(self, name: str, data: Any = None) -> RunRecord:
        """Run a job here and now (no dedupe, no retry); recorded as ``manual``."""
        job = self._job(name)
        await self._ensure_open()
        started = self._now_ms()
        token = await self.backend.start_manual(name, self.instance_id, started)
        signal = AbortSignal()
        outcome, _ = await self._attempts.invoke(job, started, 1, "manual", signal, data,
                                                 manual=True)
        status = status_of(outcome.error)
        finish = build_finish(name, started, self.instance_id, 1, status,
                              describe(outcome.error), history_size=job.history_size,
                              history_ttl=job.history_ttl, retain_runs_ms=job.retain_runs_ms)
        await self.backend.finish_manual(token, finish.status, finish.error,
                                         finish.history_size, finish.history_ttl_ms)
        self._emit(status, name, started, 1, "manual", outcome.error)
        finished = self._now_ms()
        return RunRecord(name, started, ms_to_datetime(started), self.instance_id, True, 1,
                         "manual", finish.status, ms_to_datetime(started),
                         ms_to_datetime(finished), (finished - started) / 1000, finish.error)

    def _woken(self, wakeup: Wakeup) -> None:
        """A message from the backend's wake-up channel
        ([`Backend.watch()`][anarchon.backends.base.Backend.watch])."""
        if wakeup.kind == "released":
            # a backup of that run claims it now instead of at its next heartbeat (the
            # store still decides: the claim is fenced on the released attempt)
            key = RunKey(wakeup.name, wakeup.slot)
            if self._keeper is not None and self.running and self._keeper.unwatch(key):
                self._expired(RunState(wakeup.name, wakeup.slot, "", wakeup.attempt,
                                       running=True, lease_expired=True, handed_over=True))
        elif wakeup.kind == "trigger":
            if wakeup.name in self._jobs:
                self._inbox.wake.set()
        elif wakeup.kind == "changed":
            if self.running and self._controls.enabled:
                self._spawn(self._refresh_controls())
        else:  # "up" (maybe after messages were missed) or "down": poll once now
            self._inbox.channel_up = wakeup.kind == "up"
            self._inbox.wake.set()
            if self._inbox.channel_up and self._keeper is not None:
                self._keeper.poke()

    async def _refresh_controls(self) -> None:
        try:
            await self._controls.refresh()
        except Exception as exc:
            self._emit("error", None, error=exc)

    @property
    def _channel_up(self) -> bool:
        """The backend's wake-up channel is up (triggers arrive as messages)."""
        return self._inbox.channel_up

    async def history(self, name: str, count: int = 20) -> list[RunRecord]:
        """Newest-first attempts of ``name`` from all instances (connects on demand)."""
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise ValueError(f"count must be a positive int, got {count!r}")
        await self._ensure_open()
        return await self.backend.history(name, count)

    async def last_run(self, name: str) -> RunRecord | None:
        """The newest attempt of ``name`` (skip records passed over), or ``None``."""
        records = await self.history(name, LAST_RUN_LOOKBACK)
        return next((r for r in records if r.status != "skipped"), None)


def _log_crash(task: asyncio.Task[Any]) -> None:
    if not task.cancelled() and task.exception() is not None:
        logger.error("anarchon internal task failed", exc_info=task.exception())


__all__ = ["AsyncScheduler"]
