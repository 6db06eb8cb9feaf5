"""AsyncScheduler: the one engine. Plans slots, claims them, runs and records them.

The scheduler is the composition root: it builds the engine's components, each given
the shared ``Runtime`` and the other components it uses by name (``JobRegistry`` for
registration, ``Planner`` for due slots, ``Claims``, ``Attempts``, ``Controls``,
``WakeChannel``, ``LoopHost``), and forwards its public calls to them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from datetime import datetime
from os import PathLike
from typing import TYPE_CHECKING, Any, TypeVar, overload

from ..backends.base import Backend, LeaseBackend
from ..backends.capabilities import TriggerStore
from ..backends.trigger_rules import trigger_ttl_for
from ..clock import SYSTEM_CLOCK, Clock
from ..control.calls import ControlCalls
from ..control.controls import Controls
from ..control.registration_refresh import RegistrationRefresh
from ..control.runtime import RuntimeControl
from ..control.trigger_calls import TriggerCalls
from ..control.trigger_inbox import SAFETY_POLL as SAFETY_POLL
from ..control.trigger_inbox import TriggerInbox
from ..durations import DurationLike, parse_duration
from ..events import EventType, Listener
from ..history import RunRecord
from ..jobs.definition import (
    Handler,
    Job,
    resolve_instance_id,
    resolve_scheduler_options,
    warn_if_past,
)
from ..jobs.job_registry import JobRegistry
from ..jobs.table import JobTable
from ..observability import Observer
from ..schedules.kinds import Schedule
from .aio import cancel_and_wait
from .attempts import Attempts
from .batcher import StoreCalls
from .claims import Claims
from .lease_keeper import LeaseKeeper
from .loop_host import LoopHost
from .outcome_writes import call_bound
from .plan import jitter_cap_ms as jitter_cap_ms
from .planner import Planner
from .runtime import EventSink, Runtime, SchedulerStats, TaskSet, job_spec
from .store_wait import serve
from .wake_channel import WakeChannel

if TYPE_CHECKING:
    from ..option_types import JobOptions, SchedulerOptionsDict, Unpack

logger = logging.getLogger("anarchon")
F = TypeVar("F", bound=Callable[..., Any])
S = TypeVar("S", bound="AsyncScheduler")

#: with a backend that batches claims, each job's jitter is rounded up to this grid (never
#: beyond the job's ``jitter``) so that jobs due within the same 20 ms wake and claim
#: together: one store call per step. Measured at 1,000 jobs/s on 3 instances: a 5 ms
#: grid cost ~60 % more CPU (4x the calls) and gave no lower start delays
CLAIM_GRID_MS = 20.0
#: a batch of finishes (or of catch-up and takeover claims) is sent this long after its
#: first item; 0: on the next loop turn
BATCH_WINDOW_S = 0.0
#: records ``last_run()`` reads to find the newest attempt among skip records
LAST_RUN_LOOKBACK = 50


class AsyncScheduler(ControlCalls):
    """Runs jobs on an asyncio event loop; use ``async with`` or ``start()``/``stop()``.

    ``backend`` is required (there is no implicit store). Options are those of
    docs/contract.md (*Options*):
    ``lease``, ``heartbeat`` and defaults for every job (``jitter``, ``max_late``,
    ``timeout``, ``timezone``, ``history_size``, ``history_ttl``, ``data`` …).
    ``instance_id`` defaults to ``host:pid:random``; ``clock`` is injectable for tests;
    ``liveness_file`` is touched at each confirmed heartbeat (docs/deployment.md).
    """

    # declared here, assigned in __init__: the callbacks wired before them refer to them
    # (and mypy 1.10 would otherwise defer __init__ and lose its ``Unpack`` signature)
    _claims: Claims
    _planner: Planner
    _wake: WakeChannel

    def __init__(self, backend: Backend | None = None, *, instance_id: str | None = None,
                 clock: Clock | None = None, metrics: bool = False,
                 liveness_file: str | PathLike[str] | None = None,
                 **options: Unpack[SchedulerOptionsDict]) -> None:
        if backend is None:
            raise TypeError(
                "Scheduler needs a backend, e.g. Scheduler(backend=SqliteBackend("
                "database='./jobs.db')) or RedisBackend(redis='redis://localhost:6379'); "
                "anarchon has no implicit store"
            )
        if not isinstance(backend, Backend):
            raise TypeError(f"backend must be an anarchon Backend, got {backend!r}")
        self.backend = backend
        self.options = resolve_scheduler_options(options, backend)
        if isinstance(backend, TriggerStore) and backend.trigger_ttl is None:  # trigger_rules
            backend.trigger_ttl = trigger_ttl_for(self.options.lease)
        self.instance_id = resolve_instance_id(instance_id)
        self.clock = clock or SYSTEM_CLOCK
        jobs = JobTable()
        #: what every component shares (store, options, clock, events, tasks, jobs)
        self.runtime = runtime = Runtime(backend, self.options, self.clock, self.instance_id,
                                         EventSink(self.instance_id, repr(backend),
                                                   call_bound(self.options.lease)),
                                         TaskSet(), jobs)
        #: the loop and the store connection: the seam of the blocking ``Scheduler``
        self.host = host = LoopHost(backend)
        #: this scheduler's jobs and the ways to add them (``every()`` … forward to it)
        self.registry = JobRegistry(backend, self.options, self.clock, jobs,
                                    added=self._job_added, removed=self._job_removed)
        self.outage = runtime.events.outage  # what the log says of store errors
        # claims and finishes due together go to the store as one call (if it can)
        self._calls = StoreCalls(backend, window=BATCH_WINDOW_S, grid_ms=CLAIM_GRID_MS)
        # owns the table of runs executing here; a run the store forgot is claimed again
        self._attempts = Attempts(runtime, self._calls, lambda state: self._claims.expired(state),
                                  lambda job, slot: self._claims.claim_and_run(job, slot,
                                                                         "scheduled"))
        self.observer = Observer(runtime, self.stats, lambda: self._attempts.keeper,
                                 metrics, liveness_file)  # logs, metrics, spans, health
        self._registrations = RegistrationRefresh(runtime)
        # pauses, overrides and dynamic jobs, as applied
        self._controls = Controls(runtime, schedule=lambda job: self._planner.schedule(job),
                                  unplan=lambda name: self._planner.unplan(name),
                                  on_loop=host.on_loop, listen=lambda: self._wake.listen())
        self._claims = claims = Claims(runtime, self._controls, self._calls, self._attempts)
        self._planner = Planner(runtime, self._controls, claims, self._calls)
        self.control = RuntimeControl(
            backend, self.options, self.instance_id, jobs, self._controls, claims.backlog,
            runtime.emit, ensure_open=host.ensure_open, next_run=self.next_run,
            running=lambda: self.running)
        self.trigger_calls = TriggerCalls(backend, jobs, host.ensure_open,
                                          self.control.listed)
        inbox = TriggerInbox(runtime, self._controls, claims.recovery.wake, self.run_now)
        self._wake = WakeChannel(runtime, self._controls, inbox, claims,
                                        lambda: self._attempts.keeper)

    # -- registration (``JobRegistry``) ------------------------------------------------------

    @overload
    def every(self, name: str | None, interval: Any, handler: None = None,
              **options: Unpack[JobOptions]) -> Callable[[F], F]: ...

    @overload
    def every(self: S, name: str | None, interval: Any, handler: Handler,
              **options: Unpack[JobOptions]) -> S: ...

    def every(self, name: str | None = None, interval: Any = None,
              handler: Handler | None = None, **options: Unpack[JobOptions]) -> Any:
        """Run every ``interval`` on the UTC epoch grid (plus ``offset``).

        With a handler: registers and returns the scheduler (chainable). Without: returns a
        decorator that registers the function (or, in a class body, the method for every
        instance) and returns it unchanged.
        """
        return self.registry.add("every", name, interval, handler, options, self)

    @overload
    def cron(self, name: str | None, expr: str, handler: None = None,
             **options: Unpack[JobOptions]) -> Callable[[F], F]: ...

    @overload
    def cron(self: S, name: str | None, expr: str, handler: Handler,
             **options: Unpack[JobOptions]) -> S: ...

    def cron(self, name: str | None = None, expr: Any = None, handler: Handler | None = None,
             **options: Unpack[JobOptions]) -> Any:
        """Run on a cron expression (5 fields, or 6 with seconds) in ``timezone``."""
        return self.registry.add("cron", name, expr, handler, options, self)

    @overload
    def at(self, name: str | None, when: Any, handler: None = None,
           **options: Unpack[JobOptions]) -> Callable[[F], F]: ...

    @overload
    def at(self: S, name: str | None, when: Any, handler: Handler,
           **options: Unpack[JobOptions]) -> S: ...

    def at(self, name: str | None = None, when: Any = None, handler: Handler | None = None,
           **options: Unpack[JobOptions]) -> Any:
        """Run once at ``when``: an aware datetime, epoch seconds or ISO-8601 string."""
        return self.registry.add("at", name, when, handler, options, self)

    @overload
    def schedule(self, name: str | None, schedule: Schedule, handler: None = None,
                 **options: Unpack[JobOptions]) -> Callable[[F], F]: ...

    @overload
    def schedule(self: S, name: str | None, schedule: Schedule, handler: Handler,
                 **options: Unpack[JobOptions]) -> S: ...

    def schedule(self, name: str | None = None, schedule: Schedule | None = None,
                 handler: Handler | None = None, **options: Unpack[JobOptions]) -> Any:
        """Run on a custom [`Schedule`][anarchon.schedules.Schedule] (pure and identical on
        every instance, e.g. a framework's own calendar rules). Options follow its ``kind``."""
        if not isinstance(schedule, Schedule):
            raise TypeError(f"schedule({name!r}) needs an anarchon.schedules.kinds.Schedule, "
                            f"got {schedule!r}")
        return self.registry.add(schedule.kind, name, schedule, handler, options, self)

    def declare_job(self, kind: str, name: str, when: Any, handler: Handler,
                    options: Mapping[str, Any], *, framework: str | None = None) -> None:
        """Check and add one job: the protocol every registration path ends in (see
        ``JobRegistry.declare_job()``; ``framework``: the layer declaring it)."""
        self.registry.declare_job(kind, name, when, handler, options, framework=framework)

    def register(self, obj: object, prefix: str = "",
                 defaults: Mapping[str, Any] | None = None) -> list[str]:
        """Register the job-marked methods of ``obj``; returns the job names.

        Names are ``prefix`` + the mark's name (or ``ClassName-method``). ``defaults`` fill
        options the marks leave out (``data`` dicts merge, the mark's keys winning).
        """
        return self.registry.register(obj, prefix, defaults)

    def remove(self, name: str) -> None:
        """Stop scheduling ``name`` on this instance (history stays in the store)."""
        self.registry.remove(name)

    def next_runs(self, name: str, count: int = 5, after: datetime | None = None
                  ) -> list[datetime]:
        """The next ``count`` slots of ``name`` after ``after`` (default now), as aware UTC
        datetimes. Pure: the public way to see the slot maths, DST included."""
        return self.registry.next_runs(name, count, after)

    def next_run(self, name: str) -> datetime | None:
        """The next slot of ``name`` as an aware UTC datetime, or ``None`` if none is left."""
        slots = self.registry.next_runs(name, 1)
        return slots[0] if slots else None

    def job_schedule(self, name: str) -> Schedule:
        """The schedule job ``name`` runs on here: a code job's as declared (or as a stored
        override replaced it), a dynamic job's as last read from the store. From memory,
        no store call; [`JobNotFoundError`][anarchon.errors.JobNotFoundError] for a job not
        registered here."""
        return self.registry.job(name).schedule

    @property
    def job_names(self) -> list[str]:
        """Names of the jobs registered here."""
        return list(self.runtime.jobs)

    def _job_added(self, job: Job) -> None:
        job = self.runtime.jobs.put(self._controls.adopt(job))

        def schedule() -> None:
            if self.running:
                self.runtime.spawn(self.backend.register([job_spec(job)]))
                self._planner.schedule(job)
                self._wake.listen()  # the first job: triggers and wake-ups from now on

        if self.running:
            self.host.on_loop(schedule)

    def _job_removed(self, name: str) -> None:
        self.host.on_loop(lambda: self._planner.unplan(name))
        self._claims.backlog.forget(name)
        self._controls.forget(name)

    # -- events and state -----------------------------------------------------------------

    def on(self, event: EventType, listener: Listener) -> Listener:
        """Call ``listener(event)`` for every event of that type; returns the listener."""
        self.runtime.events.on(event, listener)
        return listener

    def stats(self) -> SchedulerStats:
        """A [`SchedulerStats`][anarchon.engine.runtime.SchedulerStats] snapshot of this
        scheduler; no I/O, safe from any thread (the numbers may be a moment old)."""
        tasks = self.runtime.tasks
        keeper = self._attempts.keeper
        return SchedulerStats(phase=tasks.phase, jobs=len(self.runtime.jobs),
                              runs=len(self._attempts.runs),
                              held_leases=0 if keeper is None else len(keeper.held),
                              tasks=len(tasks.tasks), wake_channel_up=self._wake.up)

    @property
    def lease_keeper(self) -> LeaseKeeper | None:
        """The heartbeat loop (``anarchon.engine.lease_keeper.LeaseKeeper``) of a started
        scheduler on a lease backend, else ``None``: for health checks, and for tests
        that freeze it (``suspend()``) as a paused process would be."""
        return self._attempts.keeper

    @property
    def running(self) -> bool:
        return self.runtime.tasks.running

    # -- lifecycle -----------------------------------------------------------------------

    async def start(self, wait: bool = False) -> None:
        """Connect, register jobs, recover unfinished runs, catch up, then schedule.

        A store that does not answer raises [`StoreError`][anarchon.errors.StoreError] at
        once, unless ``wait=True``: then the connection is retried with a backoff (0.5 s
        doubling to 10 s) and one WARNING names the store, then one every 30 s, until it
        answers; a ``stop()`` meanwhile makes ``start()`` return without starting.
        """
        tasks = self.runtime.tasks
        if tasks.started:
            raise RuntimeError("scheduler already started")
        if tasks.stopping:
            raise RuntimeError("a stopped scheduler cannot be started again; create a new one")
        self.host.bind()
        if wait:
            if not await self.host.store_wait.until(self._connect) or tasks.stopping:
                return
        else:
            await self._connect()
        tasks.mark_started()
        leased = isinstance(self.backend, LeaseBackend)
        if isinstance(self.backend, LeaseBackend):  # (narrows the type for mypy)
            self._attempts.keep_leases(self.backend)
            await self._attempts.start_leases()
            self.runtime.spawn(self._attempts.watch_loop_lag())
            await self._claims.recover()
        # one instant splits the slots: up to it catch-up's, after it the planner's
        # (two readings of the clock would let a slot fall between them, unclaimed)
        split_ms = self.runtime.now_ms()
        if leased:
            await self._claims.catch_up(split_ms)
        for job in list(self.runtime.jobs.values()):
            warn_if_past(job, split_ms, leased)
            self._planner.schedule(job, after_ms=split_ms)
        self._planner.start()
        self.runtime.spawn(self._registrations.run())
        self._wake.listen()  # if there is a job or a handler (else when one is added)
        self.observer.started()

    async def _connect(self) -> None:
        """Open the store and register this instance's jobs: the first calls to answer."""
        await self.host.ensure_open()
        jobs = self.runtime.jobs
        await self.backend.register([job_spec(job) for job in jobs.values()])
        if self._controls.enabled:  # pauses, overrides and dynamic jobs apply from the start
            await self._controls.refresh()
            await self._controls.offer(force=True)
            dynamic = [job_spec(jobs[name]) for name in self._controls.dynamic]
            if dynamic:  # known to the store (catch-up) like the code's jobs
                await self.backend.register(dynamic)

    async def run(self, stop_timeout: DurationLike = 30) -> None:
        """``start(wait=True)``, run until SIGINT/SIGTERM (or ``stop()``), then stop
        gracefully and return: the long-running entry point, which outlasts a store that
        is down when it starts. Signals are handled only on the main thread's loop."""
        await serve(self, self.host.store_wait, stop_timeout)

    async def stop(self, timeout: DurationLike = 30) -> None:
        """Stop scheduling, abort running handlers and hand their runs over.

        Waits up to ``timeout`` for handlers; a handler still running then keeps its
        thread but loses its heartbeat, so a backup takes over after the lease expires.
        Nothing is sent to the store after this returns.
        """
        wait = parse_duration(timeout, option="timeout")
        tasks = self.runtime.tasks
        if tasks.stopping:
            return
        tasks.mark_stopping()
        self.host.abandon_start()
        await self.host.store_wait.ended()
        self._planner.stop()
        if self._attempts.keeper is not None:
            self._attempts.keeper.unwatch_all()
        self._attempts.abort_all()
        if runs := tasks.runs:
            _, pending = await asyncio.wait(set(runs), timeout=wait)
            if pending:
                logger.warning("%d run(s) outlived stop(timeout=%gs); a backup takes them "
                               "over when their lease expires", len(pending), wait)
                await cancel_and_wait(pending)
        await self._claims.skip_records.drain()
        tasks.mark_stopped()
        await cancel_and_wait(list(tasks.tasks))
        await self._attempts.stop_leases()
        await self._calls.aclose()  # batched calls still in flight are cancelled too
        await self._controls.withdraw()
        await self.host.close()
        self.observer.stopped()

    async def __aenter__(self) -> AsyncScheduler:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    # -- runs and queries -----------------------------------------------------------------

    def lease_remaining(self, name: str, slot: int, attempt: int | None = None
                        ) -> float | None:
        """Seconds the lease of run ``(name, slot)`` is known to last on this instance.

        Judged as the lease keeper judges it: on the monotonic clock, up to the run's
        local lease deadline (see docs/guarantees.md). A handler about to do something
        that must happen at most once (publish a message) can check it is still the
        owner: a process paused past its lease gets a small or negative value until its
        signal aborts with reason ``lost``.

        Returns ``None`` when there is no lease to judge (a claim-only backend, or the
        scheduler was not started), ``0.0`` when this instance does not hold the run
        (never claimed here, finished, lost, or ``attempt`` given and not the held one).
        Safe to call from a handler's thread.
        """
        return self._attempts.lease_remaining(name, slot, attempt)

    async def run_now(self, name: str, data: Any = None) -> RunRecord:
        """Run a job here and now (no dedupe, no retry); recorded as ``manual``."""
        job = self.registry.job(name)
        await self.host.ensure_open()
        return await self._attempts.run_manual(job, data)

    async def history(self, name: str, count: int = 20) -> list[RunRecord]:
        """Newest-first attempts of ``name`` from all instances (connects on demand)."""
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise ValueError(f"count must be a positive int, got {count!r}")
        await self.host.ensure_open()
        return await self.backend.history(name, count)

    async def last_run(self, name: str) -> RunRecord | None:
        """The newest attempt of ``name`` (skip records passed over), or ``None``."""
        records = await self.history(name, LAST_RUN_LOOKBACK)
        return next((r for r in records if r.status != "skipped"), None)


__all__ = ["AsyncScheduler"]
