"""Scheduler: the blocking face of [`AsyncScheduler`][anarchon.AsyncScheduler] for threads.

The engine runs on an event loop in a background thread; every call is forwarded to it.
"""

from __future__ import annotations

import asyncio
import atexit
import signal
import threading
import weakref
from collections.abc import Callable, Coroutine, Sequence
from datetime import datetime
from os import PathLike
from types import FrameType
from typing import TYPE_CHECKING, Any, TypeVar, overload

from ..backends.base import Backend, JobSpec
from ..backends.capabilities import as_values
from ..clock import Clock
from ..control.changes import Change
from ..durations import DurationLike
from ..events import EventType, Listener
from ..history import JobInfo, RunRecord
from ..jobs.definition import Handler
from ..schedules.kinds import Schedule
from .portal import Portal
from .runtime import SchedulerStats
from .scheduler import AsyncScheduler

if TYPE_CHECKING:
    from ..option_types import JobOptions, SchedulerOptionsDict, Unpack

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])

#: how long the exit hook waits for one scheduler's connections to close (seconds)
EXIT_CLOSE_WAIT = 5.0
#: schedulers whose loop thread runs, with that thread (closed at exit unless they were
#: started)
_LOOPS: weakref.WeakKeyDictionary[Scheduler, Portal] = weakref.WeakKeyDictionary()


@atexit.register
def _close_at_exit() -> None:
    """At interpreter exit, release what schedulers that were never started opened for
    queries (``history()``, ``jobs()`` …): their connection pools are closed on their
    loop, so no "Task was destroyed but it is pending!" is printed."""
    for scheduler, portal in list(_LOOPS.items()):
        if scheduler.core.runtime.tasks.started or not portal.active:
            continue
        closing = asyncio.run_coroutine_threadsafe(scheduler.core.backend.close(),
                                                   portal.loop())
        try:
            closing.result(timeout=EXIT_CLOSE_WAIT)
        except Exception:  # exiting anyway: a store that hangs or is gone changes nothing
            continue
        portal.close()


class Scheduler:
    """Runs jobs from a threaded (or plain) Python program.

    ``Scheduler(backend=..., **options)`` takes the same arguments as
    [`AsyncScheduler`][anarchon.AsyncScheduler] (see [Options](../options.md)). ``run()``
    blocks until SIGINT/SIGTERM and then stops gracefully; ``start()``/``stop()`` (or
    ``with Scheduler(...) as scheduler:``) run it in the background.
    """

    def __init__(self, backend: Backend | None = None, *, instance_id: str | None = None,
                 clock: Clock | None = None, metrics: bool = False,
                 liveness_file: str | PathLike[str] | None = None,
                 **options: Unpack[SchedulerOptionsDict]) -> None:
        self.core = AsyncScheduler(backend, instance_id=instance_id, clock=clock,
                                   metrics=metrics, liveness_file=liveness_file,
                                   **options)
        self._portal = Portal()

    # -- registration (pure, forwarded) ------------------------------------------------------

    @property
    def instance_id(self) -> str:
        """This instance's id, recorded with each attempt it runs (default host:pid:random)."""
        return self.core.instance_id

    @property
    def backend(self) -> Backend:
        """The store this scheduler claims in."""
        return self.core.backend

    @overload
    def every(self, name: str | None, interval: Any, handler: None = None,
              **options: Unpack[JobOptions]) -> Callable[[F], F]: ...

    @overload
    def every(self, name: str | None, interval: Any, handler: Handler,
              **options: Unpack[JobOptions]) -> Scheduler: ...

    def every(self, name: str | None = None, interval: Any = None,
              handler: Handler | None = None, **options: Unpack[JobOptions]) -> Any:
        """See [`AsyncScheduler.every()`][anarchon.AsyncScheduler.every]; chainable with a handler,
        else a decorator."""
        result = self.core.every(name, interval, handler, **options)
        return self if handler is not None else result

    @overload
    def cron(self, name: str | None, expr: str, handler: None = None,
             **options: Unpack[JobOptions]) -> Callable[[F], F]: ...

    @overload
    def cron(self, name: str | None, expr: str, handler: Handler,
             **options: Unpack[JobOptions]) -> Scheduler: ...

    def cron(self, name: str | None = None, expr: Any = None, handler: Handler | None = None,
             **options: Unpack[JobOptions]) -> Any:
        """See [`AsyncScheduler.cron()`][anarchon.AsyncScheduler.cron]."""
        result = self.core.cron(name, expr, handler, **options)
        return self if handler is not None else result

    @overload
    def at(self, name: str | None, when: Any, handler: None = None,
           **options: Unpack[JobOptions]) -> Callable[[F], F]: ...

    @overload
    def at(self, name: str | None, when: Any, handler: Handler,
           **options: Unpack[JobOptions]) -> Scheduler: ...

    def at(self, name: str | None = None, when: Any = None, handler: Handler | None = None,
           **options: Unpack[JobOptions]) -> Any:
        """See [`AsyncScheduler.at()`][anarchon.AsyncScheduler.at]."""
        result = self.core.at(name, when, handler, **options)
        return self if handler is not None else result

    def schedule(self, name: str | None = None, schedule: Any = None,
                 handler: Handler | None = None, **options: Unpack[JobOptions]) -> Any:
        """See [`AsyncScheduler.schedule()`][anarchon.AsyncScheduler.schedule] (a custom
        [`anarchon.schedules.kinds.Schedule`][anarchon.schedules.Schedule])."""
        result = self.core.schedule(name, schedule, handler, **options)
        return self if handler is not None else result

    def register(self, obj: object, prefix: str = "",
                 defaults: dict[str, Any] | None = None) -> list[str]:
        """Register ``obj``'s job-marked methods (see
        [`AsyncScheduler.register()`][anarchon.AsyncScheduler.register])."""
        return self.core.register(obj, prefix=prefix, defaults=defaults)

    def declare_job(self, kind: str, name: str, when: Any, handler: Handler,
                    options: dict[str, Any], *, framework: str | None = None) -> None:
        """Check and add one job (see ``AsyncScheduler.declare_job()``; ``framework``: the
        layer declaring it, e.g. ``"celery"``)."""
        self.core.declare_job(kind, name, when, handler, options, framework=framework)

    def remove(self, name: str) -> None:
        """Stop scheduling ``name`` here."""
        if self._portal.active:
            self._call_soon(self.core.remove, name)
        else:
            self.core.remove(name)

    def on(self, event: EventType, listener: Listener) -> Listener:
        """Call ``listener(event)`` for each event of that type (on the engine's thread)."""
        return self.core.on(event, listener)

    def next_run(self, name: str) -> datetime | None:
        """The next slot of ``name`` as an aware UTC datetime, or ``None`` if none is left.

        Pure (no I/O); raises [`JobNotFoundError`][anarchon.errors.JobNotFoundError] for a
        job not registered here.
        """
        return self.core.next_run(name)

    def next_runs(self, name: str, count: int = 5, after: datetime | None = None
                  ) -> list[datetime]:
        """The next ``count`` slots of ``name`` after ``after`` (an aware datetime; default
        now), as aware UTC datetimes. Pure: the way to check the slot maths, DST included."""
        return self.core.next_runs(name, count, after)

    def job_schedule(self, name: str) -> Schedule:
        """The schedule job ``name`` runs on here (a dynamic job's as last read from the
        store); from memory. Raises [`JobNotFoundError`][anarchon.errors.JobNotFoundError]
        for a job not registered here."""
        return self.core.job_schedule(name)

    @property
    def job_names(self) -> list[str]:
        """Names of the jobs registered on this instance, in registration order."""
        return self.core.job_names

    def lease_remaining(self, name: str, slot: int, attempt: int | None = None
                        ) -> float | None:
        """Seconds the lease of run ``(name, slot)`` is known to last on this instance.

        See [`AsyncScheduler.lease_remaining()`][anarchon.AsyncScheduler.lease_remaining]:
        ``0.0`` when this instance does not hold that run (or holds another ``attempt``),
        ``None`` on a claim-only backend or before ``start()``; small or negative after a
        pause past the lease. Safe to call from any thread, handlers included.
        """
        return self.core.lease_remaining(name, slot, attempt)

    # -- the loop thread -------------------------------------------------------------------

    def run_coroutine(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on this scheduler's loop thread and return its result: for
        framework layers that call the async store API from blocking code (as
        ``anarchon_celery`` and ``anarchon_django`` do). Blocks the calling thread; never
        call it from a handler running on that loop."""
        _LOOPS[self] = self._portal
        return self._portal.call(coro)

    def _call_soon(self, fn: Any, *args: Any) -> None:
        async def apply() -> None:
            fn(*args)

        self._portal.call(apply())

    # -- lifecycle ------------------------------------------------------------------------

    def start(self, wait: bool = False) -> None:
        """Connect and start scheduling in the background; returns once started.

        A store that does not answer raises at once, unless ``wait=True`` (see
        [`AsyncScheduler.start()`][anarchon.AsyncScheduler.start]): then this blocks,
        retrying, until the store answers or ``stop()`` (or an exception in this thread,
        e.g. ``KeyboardInterrupt``) ends the wait.
        """
        try:
            self.run_coroutine(self.core.start(wait))
        except BaseException:
            if wait:
                self._abandon_start()
            raise

    def _abandon_start(self) -> None:
        """End a waiting ``start(wait=True)`` from any thread (a signal handler too)."""
        self.core.host.abandon_start_soon()

    def stop(self, timeout: DurationLike = 30) -> None:
        """Graceful stop (see [`AsyncScheduler.stop()`][anarchon.AsyncScheduler.stop]); blocks
        until it is done."""
        if not self._portal.active:
            return
        try:
            self.run_coroutine(self.core.stop(timeout))
        finally:
            self._portal.close()

    def run(self, stop_timeout: DurationLike = 30) -> None:
        """``start(wait=True)`` (a store that is down is waited for), block until
        SIGINT/SIGTERM, then stop gracefully and return."""
        stop_requested = threading.Event()

        def request_stop(signum: int, frame: FrameType | None) -> None:
            stop_requested.set()
            self._abandon_start()

        previous = {}
        if threading.current_thread() is threading.main_thread():
            previous = {sig: signal.signal(sig, request_stop)
                        for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            self.start(wait=True)
            while self.core.running and not stop_requested.wait(1.0):
                pass
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            self.stop(stop_timeout)

    def __enter__(self) -> Scheduler:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- manual runs and queries ----------------------------------------------------------

    def run_now(self, name: str, data: Any = None) -> RunRecord:
        """Run ``name`` here and now; blocks until it ends and returns its record."""
        return self.run_coroutine(self.core.run_now(name, data))

    def trigger(self, name: str, data: Any = None) -> str:
        """Request a run of ``name`` that one running instance executes (see
        [`AsyncScheduler.trigger()`][anarchon.AsyncScheduler.trigger]); returns the request id."""
        return self.run_coroutine(self.core.trigger(name, data))

    def forget(self, name: str) -> int:
        """Remove job ``name``'s records from the store (see
        [`AsyncScheduler.forget()`][anarchon.AsyncScheduler.forget]); how many."""
        return self.run_coroutine(self.core.forget(name))

    def history(self, name: str, count: int = 20) -> list[RunRecord]:
        """Newest-first attempts from all instances (connects on demand)."""
        return self.run_coroutine(self.core.history(name, count))

    def last_run(self, name: str) -> RunRecord | None:
        """The newest attempt of ``name`` from any instance, or ``None`` (connects on demand)."""
        return self.run_coroutine(self.core.last_run(name))

    def stats(self) -> SchedulerStats:
        """A snapshot of this scheduler (see
        [`AsyncScheduler.stats()`][anarchon.AsyncScheduler.stats]); no I/O."""
        return self.core.stats()

    def jobs(self) -> list[JobInfo]:
        """Jobs registered here plus jobs other instances registered in the store, by name
        (connects on demand: works in a process that registers no jobs)."""
        return self.run_coroutine(self.core.jobs())

    # -- runtime control (see AsyncScheduler: anarchon.control.runtime) ---------------------------

    def handler(self, name: str | Callable[..., Any] | None = None,
                fn: Handler | None = None) -> Any:
        """Offer a callable under a handler name for dynamic jobs (see
        [`AsyncScheduler.handler()`][anarchon.AsyncScheduler.handler])."""
        result = self.core.handler(name, fn)
        return self if result is self.core else result

    def pause(self, name: str, *, by: str | None = None) -> Change:
        """Skip job ``name``'s slots on every instance until ``resume()``."""
        return self.run_coroutine(self.core.pause(name, by=by))

    def resume(self, name: str, *, by: str | None = None) -> Change:
        """Schedule a paused job again, from its next slot."""
        return self.run_coroutine(self.core.resume(name, by=by))

    def reschedule(self, name: str, *, every: Any = None, cron: str | None = None,
                   timezone: str | None = None, offset: Any = None, custom: Any = None,
                   reset: bool = False, by: str | None = None) -> Change:
        """Replace job ``name``'s schedule everywhere, or ``reset=True`` (see
        [`AsyncScheduler.reschedule()`][anarchon.AsyncScheduler.reschedule])."""
        return self.run_coroutine(self.core.reschedule(name, every=every, cron=cron,
                                               timezone=timezone, offset=offset,
                                               custom=custom, reset=reset, by=by))

    def add_job(self, name: str, *, handler: str, every: Any = None, cron: str | None = None,
                at: Any = None, timezone: str | None = None, offset: Any = None,
                custom: Any = None, params: Any = None, replace: bool = False,
                paused: bool = False,
                by: str | None = None, **options: Any) -> Change:
        """Store a dynamic job (see
        [`AsyncScheduler.add_job()`][anarchon.AsyncScheduler.add_job])."""
        return self.run_coroutine(self.core.add_job(name, handler=handler, every=every, cron=cron,
                                            at=at, timezone=timezone, offset=offset,
                                            custom=custom, params=params, replace=replace,
                                            paused=paused, by=by, **options))

    def remove_job(self, name: str, *, by: str | None = None) -> Change:
        """Remove dynamic job ``name`` from every instance."""
        return self.run_coroutine(self.core.remove_job(name, by=by))

    def changes(self, name: str, count: int = 20) -> list[Change]:
        """Job ``name``'s newest changes (who changed what), newest first."""
        return self.run_coroutine(self.core.changes(name, count))

    def offered_handlers(self) -> dict[str, list[str]]:
        """The handler names each running instance offers."""
        return self.run_coroutine(self.core.offered_handlers())

    def announce(self, specs: Sequence[JobSpec]) -> None:
        """Record jobs this instance knows of but does not run, e.g. a framework's entry
        refused with the reason as its ``schedule`` text:
        [`jobs()`][anarchon.Scheduler.jobs] and ``anarchon jobs`` list them (a later
        registration of the same name replaces the text)."""
        if specs:
            self.run_coroutine(self.core.backend.register(list(specs)))

    def read_value(self, name: str, field: str) -> str | None:
        """A value shared by all instances (see
        [`ValueStore.read_value()`][anarchon.backends.capabilities.ValueStore.read_value]); connects
        on demand (also on a scheduler that never starts)."""
        return self.run_coroutine(self._read_value(name, field))

    def swap_value(self, name: str, field: str, expected: str | None, value: str) -> bool:
        """Compare-and-set of a shared value (see
        [`ValueStore.swap_value()`][anarchon.backends.capabilities.ValueStore.swap_value]); connects
        on demand."""
        return self.run_coroutine(self._swap_value(name, field, expected, value))

    async def _read_value(self, name: str, field: str) -> str | None:
        await self.core.host.ensure_open()
        return await as_values(self.core.backend).read_value(name, field)

    async def _swap_value(self, name: str, field: str, expected: str | None,
                          value: str) -> bool:
        await self.core.host.ensure_open()
        return await as_values(self.core.backend).swap_value(name, field, expected,
                                                                  value)

    def close(self) -> None:
        """Release connections opened for queries by a scheduler that never started."""
        if self._portal.active and not self.core.runtime.tasks.started:
            self.run_coroutine(self.core.backend.close())
        self._portal.close()
