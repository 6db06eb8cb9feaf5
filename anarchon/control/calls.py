"""The public runtime-control and manual-run calls of the schedulers, delegated.

``AsyncScheduler`` inherits these methods; each hands the call to a composed component
(``RuntimeControl`` for pause, resume, reschedule, dynamic jobs and queries;
``TriggerCalls`` for ``trigger()`` and ``forget()``) that the scheduler creates with its
collaborators. No state lives here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from ..history import JobInfo
from ..jobs.definition import Handler
from .changes import Change
from .runtime import RuntimeControl
from .trigger_calls import TriggerCalls

F = TypeVar("F", bound=Callable[..., Any])


class ControlCalls:
    """``handler()``, the runtime-control calls and the manual-run calls."""

    #: the runtime-control component (``anarchon.control.runtime``): framework layers
    #: use it for calls on their own view of the store (``RuntimeControl.on_store``)
    control: RuntimeControl
    #: the manual-run calls that go through the store
    trigger_calls: TriggerCalls

    def handler(self, name: str | Callable[..., Any] | None = None,
                fn: Handler | None = None) -> Any:
        """Offer a callable under a handler name for dynamic jobs (``add_job()``).

        ``@scheduler.handler("report")``, ``@scheduler.handler`` (the function's name) or
        ``scheduler.handler("report", fn)``. A dynamic job runs on the instances that
        offer its handler; the callable receives the run's context, whose ``params`` are
        the job's stored params.
        """
        if callable(name) and fn is None:  # @scheduler.handler: named after the function
            self.handler(getattr(name, "__name__", None), name)
            return name
        if not isinstance(name, str) or not name or name != name.strip():
            raise TypeError(f"handler name must be a non-empty str, got {name!r}")

        def offer(func: F) -> F:
            if not callable(func):
                raise TypeError(f"handler {name!r} must be callable, got {func!r}")
            self.control.controls.add_handler(name, func)
            return func

        if fn is None:
            return offer
        offer(fn)
        return self

    async def pause(self, name: str, *, by: str | None = None) -> Change:
        """Skip every slot of job ``name`` on every instance (skip reason ``paused``)
        until ``resume()``; a run in progress finishes normally."""
        return await self.control.pause(name, by=by)

    async def resume(self, name: str, *, by: str | None = None) -> Change:
        """Schedule a paused job again, from its next slot."""
        return await self.control.resume(name, by=by)

    async def reschedule(self, name: str, *, every: Any = None, cron: str | None = None,
                         timezone: str | None = None, offset: Any = None,
                         custom: Any = None, reset: bool = False,
                         by: str | None = None) -> Change:
        """Replace job ``name``'s schedule on every instance: ``every=`` (with
        ``offset=``), ``cron=`` (with ``timezone=``) or ``custom=`` (a registered
        schedule type's ``{"type", "data"}``); ``reset=True`` goes back to the
        schedule its code declares. Checked here, with the same errors as ``every()``
        and ``cron()``."""
        return await self.control.reschedule(name, every=every, cron=cron, timezone=timezone,
                                             offset=offset, custom=custom, reset=reset, by=by)

    async def add_job(self, name: str, *, handler: str, every: Any = None,
                      cron: str | None = None, at: Any = None, timezone: str | None = None,
                      offset: Any = None, custom: Any = None, params: Any = None,
                      replace: bool = False, paused: bool = False, by: str | None = None,
                      **options: Any) -> Change:
        """Store a dynamic job: every instance offering ``handler`` schedules it.

        One of ``every=``/``cron=``/``at=``/``custom=`` (``{"type": name, "data":
        {...}}`` of a type registered with
        [`register_schedule_type()`][anarchon.schedules.custom.register_schedule_type]:
        instances that did not register it do not run the job); ``params`` (JSON)
        reach the handler as ``ctx.params`` and are **stored**: they must not hold
        secrets. ``options`` are
        job options (``jitter``, ``max_late``, ``timeout``, ``overlap``,
        ``max_attempts``, ``catch_up``, ``history_size``, ``history_ttl``), checked here
        as ``every()`` checks them. A job of that name that exists already is refused,
        unless ``replace=True`` (then it is updated: add-or-update). ``paused=True``
        stores it paused (in the same change: no slot runs before it is paused); an
        update keeps a paused job paused either way.
        """
        return await self.control.add_job(name, handler=handler, every=every, cron=cron, at=at,
                                          timezone=timezone, offset=offset, custom=custom,
                                          params=params, replace=replace, paused=paused, by=by,
                                          **options)

    async def remove_job(self, name: str, *, by: str | None = None) -> Change:
        """Remove dynamic job ``name`` from every instance (its history stays)."""
        return await self.control.remove_job(name, by=by)

    async def changes(self, name: str, count: int = 20) -> list[Change]:
        """The newest ``count`` changes of job ``name`` (who changed what), newest first."""
        return await self.control.changes(name, count)

    async def offered_handlers(self) -> dict[str, list[str]]:
        """The handler names each running instance offers (instance id -> names)."""
        return await self.control.offered_handlers()

    async def jobs(self) -> list[JobInfo]:
        """Jobs registered here, jobs other instances registered in the store, and
        dynamic jobs; each with its effective schedule, where it comes from, whether it
        is paused, and (dynamic jobs) the instances that can run it."""
        return await self.control.jobs()

    async def trigger(self, name: str, data: Any = None) -> str:
        """Ask, through the store, that exactly one running instance with job ``name``
        runs it now (reason ``manual``). Works from any process, even one without jobs.

        ``data`` must be JSON-serialisable; it is stored until the run starts, so it must
        not hold secrets. Returns the request id. One manual run at a time: while a
        request for ``name`` is pending or a manual run of it is running (one started
        more than ``backend.stale_manual_after``, default 1 hour, ago no longer counts:
        its instance was most likely killed), this raises
        [`TriggerRefusedError`][anarchon.errors.TriggerRefusedError], unless the job is
        declared here with ``overlap="allow"``. A request no instance takes within
        ``backend.trigger_ttl`` (default ``max(lease, 60 s)``) is dropped unrun.
        """
        return await self.trigger_calls.trigger(name, data)

    def trigger_args(self, name: str, data: Any = None) -> tuple[str | None, bool]:
        """What ``trigger(name, data)`` stores (no I/O): ``data`` as JSON text, and
        whether the request is exclusive (one manual run at a time: unless ``name`` is
        declared here with ``overlap="allow"``). Raises ``TypeError`` for non-JSON."""
        return self.trigger_calls.trigger_args(name, data)

    async def forget(self, name: str) -> int:
        """Remove job ``name``'s records from the store (registration, runs, history,
        pending requests, shared values; not its runtime-control record); how many.

        For a job no instance declares any more (``JobInfo.gone``): an instance that still
        has it registers it again within ``anarchon.control.registration_refresh.REGISTER_EVERY``.
        Claim-only stores raise ``NotImplementedError``."""
        return await self.trigger_calls.forget(name)


__all__ = ["ControlCalls"]
