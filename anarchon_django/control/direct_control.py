"""Runtime control of the ``"django"`` store in the *caller's* thread and transaction.

Admin pages and ``manage.py anarchon`` read and change the control records through
their own connection, never through the shared scheduler's ORM thread (a second
connection): a read of a page took the generation row's lock in the request's
transaction (a ``TestCase``'s, or ``ATOMIC_REQUESTS``'), and a change on the second
connection then waited for it for ever (PostgreSQL), 50 s (MariaDB) or failed at once
(SQLite's in-memory test database).

The calls are the core's own (``anarchon.control.runtime.RuntimeControl``: the same checks,
compare-and-set, change log and ``by=``), on a view of the store whose methods run the
ORM here: reads take no lock (``Store.peek_controls``), a change waits at most
``LOCK_WAIT`` seconds for the generation row. Nothing in them suspends, so each
coroutine is driven to its end in this thread, without an event loop.
"""

from __future__ import annotations

import dataclasses
from abc import ABCMeta
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, TypeVar, cast

from anarchon import JobInfo, Scheduler
from anarchon.backends.base import Backend, JobSpec
from anarchon.backends.capabilities import ControlStore
from anarchon.backends.control import ControlChange, ControlSnapshot
from anarchon.control.changes import Change, Control
from anarchon.control.runtime import RuntimeControl
from anarchon_django.store.backend import DjangoBackend
from anarchon_django.store.control import LOCK_WAIT
from anarchon_django.store.operations import Store

T = TypeVar("T")


class _HereBackend:
    """The control calls of a ``DjangoBackend``, run on the caller's connection; every
    other attribute is the backend's own (its name, limits and option checks)."""

    def __init__(self, backend: DjangoBackend) -> None:
        self._backend = backend
        self.store: Store = backend.store

    def __getattr__(self, name: str) -> Any:
        return getattr(self._backend, name)

    async def open(self) -> None:
        return None

    async def read_controls(self) -> ControlSnapshot:
        return self.store.peek_controls()

    async def change_control(self, change: ControlChange) -> int:
        return self.store.change_control(change, wait=LOCK_WAIT)

    async def change_log(self, name: str, count: int) -> list[str]:
        return self.store.change_log(name, count)

    async def known_jobs(self) -> list[JobSpec]:
        return self.store.known_jobs()


# it answers the control calls (the rest through the backend it wraps): a ControlStore
ABCMeta.register(ControlStore, _HereBackend)  # (Backend.register is the store call)


async def _opened() -> None:
    """The caller's connection is open already."""


class AlreadyDone(ValueError):
    """A pause of a paused job, or a resume of a running one: nothing to change."""


def toggle(name: str, paused: bool) -> Callable[[Control], Control]:
    """The change of a pause (``paused``) or resume: refused with ``AlreadyDone`` when
    the record is in that state already (checked on each compare-and-set attempt)."""
    def mutate(control: Control) -> Control:
        if control.paused == paused:
            raise AlreadyDone(f"job {name!r} is {'already paused' if paused else 'not paused'}"
                              ": nothing changed (another click or another admin was first)")
        return dataclasses.replace(control, paused=paused)

    return mutate


class HereScheduler:
    """The synchronous runtime-control calls of ``Scheduler`` (``jobs``, ``pause``,
    ``resume``, ``reschedule``, ``add_job``, ``remove_job``, ``changes``,
    ``offered_handlers``, and ``run_coroutine`` of a backend coroutine, as the blocking
    ``Scheduler`` names it), each run to its end in this thread; what
    ``anarchon_celery.Entry.save(core=...)`` needs of a scheduler."""

    def __init__(self, scheduler: Scheduler, backend: DjangoBackend) -> None:
        self.backend = cast(Backend, _HereBackend(backend))
        #: the core's runtime-control calls on this thread's view of the store
        self.control: RuntimeControl = scheduler.core.control.on_store(self.backend, _opened)
        self.instance_id = scheduler.instance_id
        self.job_names = scheduler.job_names

    def run_coroutine(self, call: Coroutine[Any, Any, T]) -> T:
        return run(call)

    def jobs(self) -> list[JobInfo]:
        return run(self.control.jobs())

    def pause(self, name: str, *, by: str | None = None) -> Change:
        """The core's ``pause()``, refused when the job is paused already (when the
        compare-and-set is retried after a concurrent change too): one change per click."""
        return run(self.control.change(name, "pause", toggle(name, True), {}, by))

    def resume(self, name: str, *, by: str | None = None) -> Change:
        """The core's ``resume()``, refused when the job is not paused."""
        return run(self.control.change(name, "resume", toggle(name, False), {}, by))

    def reschedule(self, name: str, **schedule: Any) -> Change:
        return run(self.control.reschedule(name, **schedule))

    def add_job(self, name: str, **job: Any) -> Change:
        return run(self.control.add_job(name, **job))

    def remove_job(self, name: str, *, by: str | None = None) -> Change:
        return run(self.control.remove_job(name, by=by))

    def changes(self, name: str, count: int = 20) -> list[Change]:
        return run(self.control.changes(name, count))

    def offered_handlers(self) -> dict[str, list[str]]:
        return run(self.control.offered_handlers())


def here(scheduler: Scheduler) -> HereScheduler | None:
    """``scheduler``'s runtime control in this thread, or None when its store is not
    the ``"django"`` one (other stores have no transaction of the caller to meet)."""
    backend = scheduler.backend
    return HereScheduler(scheduler, backend) if isinstance(backend, DjangoBackend) else None


def run(call: Coroutine[Any, Any, T]) -> T:
    """Drive ``call`` to its end in this thread (it must never suspend)."""
    try:
        call.send(None)
    except StopIteration as done:
        return cast(T, done.value)
    call.close()
    raise RuntimeError("a runtime-control call on the Django store suspended; it must "
                       "run in the caller's thread")


__all__: Sequence[str] = ["AlreadyDone", "HereScheduler", "here", "run", "toggle"]
