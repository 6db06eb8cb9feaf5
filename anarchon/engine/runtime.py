"""What the engine's components share, handed to each explicitly.

A ``Runtime`` holds the store, the options, the clock, the instance id, where events go
(``EventSink``), the scheduler's background tasks and lifecycle (``TaskSet``: one state)
and its job table (``JobTable``: one owner for writes). A component's constructor takes
the runtime and names whatever else it uses; no component reaches into another's
private attributes. ``SchedulerStats`` is what ``AsyncScheduler.stats()`` returns.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from ..backends.base import Backend, JobSpec
from ..clock import Clock
from ..events import Event, EventType, Listener, Listeners
from ..jobs.definition import Job, SchedulerOptions
from ..jobs.table import JobTable
from .aio import log_crash
from .outages import OutageLog

#: ``new``: not started; ``running``: started and scheduling; ``stopping``: ``stop()``
#: under way (also while a ``start(wait=True)`` is being abandoned); ``stopped``: nothing
#: is sent to the store any more
Phase = Literal["new", "running", "stopping", "stopped"]


class Emit(Protocol):
    """Sends one event (``EventSink.emit``)."""

    def __call__(self, type_: EventType, name: str | None, slot: int | None = None,
                 attempt: int | None = None, reason: str | None = None,
                 error: BaseException | None = None) -> None: ...


class EventObserver(Protocol):
    """What sees every event before the listeners (``anarchon.observability.Observer``:
    logs, metrics, spans)."""

    def event(self, type_: str, name: str | None, slot: int | None, attempt: int | None,
              reason: str | None, error: BaseException | None) -> None: ...


class EventSink:
    """Where the engine's events go: the listeners, and the outage log for errors."""

    def __init__(self, instance_id: str, store: str, grace: float) -> None:
        self.instance_id = instance_id
        self.listeners = Listeners()
        #: what the log says of store errors (not the listeners); ``grace``: the longest a
        #: store call waits for its answer (a failure that late after an outage is its tail)
        self.outage = OutageLog(store=store, grace=grace)
        #: logs, metrics and spans of every event (``anarchon.observability.Observer``)
        self.observer: EventObserver | None = None

    def on(self, type_: EventType, listener: Listener) -> None:
        self.listeners.add(type_, listener)

    def emit(self, type_: EventType, name: str | None, slot: int | None = None,
             attempt: int | None = None, reason: str | None = None,
             error: BaseException | None = None) -> None:
        if type_ == "error":
            self.outage.failed(name, error)
        if self.observer is not None:
            self.observer.event(type_, name, slot, attempt, reason, error)
        if self.listeners.wants(type_):  # most events have no listener: build nothing
            self.listeners.emit(Event(type_, name, slot, attempt, reason, self.instance_id,
                                      error))


class TaskSet:
    """The background tasks of one scheduler, the runs ``stop()`` awaits, and the
    scheduler's lifecycle: one ``phase``, changed only by ``start()`` and ``stop()``."""

    def __init__(self) -> None:
        self.phase: Phase = "new"
        #: ``start()`` got as far as scheduling once (a fact kept after ``stop()``)
        self.started = False
        self.tasks: set[asyncio.Task[Any]] = set()
        #: runs (and manual runs) that ``stop()`` waits for
        self.runs: set[asyncio.Task[Any]] = set()

    @property
    def running(self) -> bool:
        return self.phase == "running"

    @property
    def stopping(self) -> bool:
        """``stop()`` was called (it may have finished)."""
        return self.phase in ("stopping", "stopped")

    @property
    def stopped(self) -> bool:
        """``stop()`` got past its last write: nothing may be sent to the store."""
        return self.phase == "stopped"

    def mark_started(self) -> None:
        self.started = True
        if self.phase == "new":
            self.phase = "running"

    def mark_stopping(self) -> None:
        self.phase = "stopping"

    def mark_stopped(self) -> None:
        self.phase = "stopped"

    def spawn(self, coro: Coroutine[Any, Any, Any],
              bucket: set[asyncio.Task[Any]] | None = None) -> asyncio.Task[Any]:
        """Run ``coro`` as a task kept in ``bucket`` (default: the background tasks)."""
        task: asyncio.Task[Any] = asyncio.ensure_future(coro)
        group = self.tasks if bucket is None else bucket
        group.add(task)
        task.add_done_callback(group.discard)
        task.add_done_callback(log_crash)
        return task

    def run(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        """Spawn a run (one that ``stop()`` waits for)."""
        return self.spawn(coro, self.runs)


def job_spec(job: Job) -> JobSpec:
    """What the store keeps of a job's registration."""
    return JobSpec(job.name, job.schedule.kind, job.schedule.describe(), job.framework)


@dataclass(eq=False)
class Runtime:
    """The shared state of one scheduler's engine (see the module doc)."""

    backend: Backend
    options: SchedulerOptions
    clock: Clock
    instance_id: str
    events: EventSink
    tasks: TaskSet
    jobs: JobTable

    def now_ms(self) -> int:
        return int(self.clock.time() * 1000)

    def emit(self, type_: EventType, name: str | None, slot: int | None = None,
             attempt: int | None = None, reason: str | None = None,
             error: BaseException | None = None) -> None:
        self.events.emit(type_, name, slot, attempt, reason, error)

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        return self.tasks.spawn(coro)

    @property
    def running(self) -> bool:
        return self.tasks.running


@dataclass(frozen=True)
class SchedulerStats:
    """A snapshot of one scheduler, for monitoring and tests (``stats()``).

    ``phase``: ``"new"``, ``"running"``, ``"stopping"`` or ``"stopped"``; ``jobs``: jobs
    registered here (dynamic ones this instance runs included); ``runs``: runs executing
    here; ``held_leases``: runs whose lease this instance renews (0 on a claim-only
    backend or before ``start()``); ``tasks``: the engine's background tasks;
    ``wake_channel_up``: the backend's wake-up channel is connected (triggers and
    hand-overs arrive as messages; ``False`` where the backend has none).
    """

    phase: Phase
    jobs: int
    runs: int
    held_leases: int
    tasks: int
    wake_channel_up: bool


__all__ = ["Emit", "EventSink", "Phase", "Runtime", "SchedulerStats", "TaskSet",
           "job_spec"]
