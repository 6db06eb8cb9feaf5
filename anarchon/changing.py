"""Runtime control, the public calls: pause, resume, reschedule, dynamic jobs, changes.

Every call works from any process that reaches the store, without ``start()`` and
without the job registered there. A change is a compare-and-set of the job's control
record (``anarchon.backends.control``); once it has returned, the store refuses every
claim planned from the record before it, and each running instance applies it within
one heartbeat (at once where the store has a wake-up channel).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from .backends.base import Backend, JobSpec
from .backends.control import ControlChange, ControlSnapshot
from .backends.frameworks import handler_framework
from .backends.trigger_rules import is_gone
from .control import (
    Action,
    Change,
    Control,
    Dynamic,
    ScheduleSpec,
    check_dynamic_options,
    check_params,
)
from .errors import JobNotFoundError, StoreError
from .history import JobInfo
from .jobs import Handler, Job, SchedulerOptions, resolve_job
from .names import check_job_name
from .slots import ms_to_datetime

if TYPE_CHECKING:
    from .controlling import Controls
    from .events import EventType

F = TypeVar("F", bound=Callable[..., Any])

#: a change that lost this many compare-and-sets in a row to concurrent changes gives up
MAX_TRIES = 20


class RuntimeControl:
    """The runtime-control calls of [`AsyncScheduler`][anarchon.AsyncScheduler]."""

    backend: Backend
    instance_id: str
    options: SchedulerOptions
    _jobs: dict[str, Job]
    _controls: Controls

    async def _ensure_open(self) -> None:
        raise NotImplementedError  # provided by the engine

    def _emit(self, type_: EventType, name: str | None, slot: int | None = None,
              attempt: int | None = None, reason: str | None = None,
              error: BaseException | None = None) -> None:
        raise NotImplementedError  # provided by the engine

    if TYPE_CHECKING:  # provided by the job registry, after this class in the MRO
        def next_run(self, name: str) -> datetime | None: ...

    @property
    def running(self) -> bool:
        raise NotImplementedError  # provided by the engine

    # -- handlers ------------------------------------------------------------------------

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
            self._controls.add_handler(name, func)
            return func

        if fn is None:
            return offer
        offer(fn)
        return self

    # -- changes -------------------------------------------------------------------------

    async def pause(self, name: str, *, by: str | None = None) -> Change:
        """Skip every slot of job ``name`` on every instance (skip reason ``paused``)
        until ``resume()``; a run in progress finishes normally."""
        return await self._change(name, "pause", lambda c: dataclasses.replace(c, paused=True),
                                  {}, by)

    async def resume(self, name: str, *, by: str | None = None) -> Change:
        """Schedule a paused job again, from its next slot."""
        return await self._change(name, "resume",
                                  lambda c: dataclasses.replace(c, paused=False), {}, by)

    async def reschedule(self, name: str, *, every: Any = None, cron: str | None = None,
                         timezone: str | None = None, offset: Any = None,
                         custom: Any = None, reset: bool = False,
                         by: str | None = None) -> Change:
        """Replace job ``name``'s schedule on every instance: ``every=`` (with
        ``offset=``), ``cron=`` (with ``timezone=``) or ``custom=`` (a registered
        schedule type's ``{"type", "data"}``); ``reset=True`` goes back to the
        schedule its code declares. Checked here, with the same errors as ``every()``
        and ``cron()``."""
        if reset:
            if any(v is not None for v in (every, cron, timezone, offset, custom)):
                raise TypeError(f"job {name!r}: reset=True takes no schedule")

            def back(control: Control) -> Control:
                if control.dynamic is not None:
                    raise ValueError(f"job {name!r} is a dynamic job: it has no schedule in "
                                     "code to go back to; give a new schedule instead")
                return dataclasses.replace(control, schedule=None)

            return await self._change(name, "reset", back, {}, by)
        spec = ScheduleSpec.choose(every=every, cron=cron, timezone=timezone, offset=offset,
                                   custom=custom, job=name)
        if spec.kind == "at":
            raise TypeError(f"job {name!r}: reschedule takes every=, cron= or custom=")
        resolve_job(spec.kind, name, spec.when, spec.options(), scheduler=self.options,
                    backend=self.backend)
        return await self._change(name, "reschedule",
                                  lambda c: dataclasses.replace(c, schedule=spec),
                                  {"schedule": spec.describe()}, by)

    async def add_job(self, name: str, *, handler: str, every: Any = None,
                      cron: str | None = None, at: Any = None, timezone: str | None = None,
                      offset: Any = None, custom: Any = None, params: Any = None,
                      replace: bool = False, paused: bool = False, by: str | None = None,
                      **options: Any) -> Change:
        """Store a dynamic job: every instance offering ``handler`` schedules it.

        One of ``every=``/``cron=``/``at=``/``custom=`` (``{"type": name, "data":
        {...}}`` of a type registered with
        [`register_schedule_type()`][anarchon.schedule_types.register_schedule_type]:
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
        check_job_name(name)
        if not isinstance(handler, str) or not handler or handler != handler.strip():
            raise TypeError(f"job {name!r}: handler must be a handler name (str), got "
                            f"{handler!r}")
        spec = ScheduleSpec.choose(every=every, cron=cron, at=at, timezone=timezone,
                                   offset=offset, custom=custom, job=name)
        stored = check_dynamic_options(options, name)
        resolve_job(spec.kind, name, spec.when, {**stored, **spec.options()},
                    scheduler=self.options, backend=self.backend)
        dynamic = Dynamic(handler, check_params(params, name), stored)

        def add(control: Control) -> Control:
            if control.dynamic is not None and not control.removed and not replace:
                raise ValueError(f"job {name!r} exists already; use replace=True to update "
                                 "it, or remove_job() first")
            return Control(paused=paused or (control.paused and replace), schedule=spec,
                           dynamic=dynamic)

        detail = {"handler": handler, "schedule": spec.describe()}
        return await self._change(name, "add", add, detail, by, new_job=True)

    async def remove_job(self, name: str, *, by: str | None = None) -> Change:
        """Remove dynamic job ``name`` from every instance (its history stays)."""
        def remove(control: Control) -> Control:
            if control.dynamic is None or control.removed:
                raise ValueError(f"job {name!r} is not a dynamic job; a job declared in "
                                 "code is removed from the code (pause() stops it now)")
            return Control(removed=True)

        return await self._change(name, "remove", remove, {}, by, new_job=True)

    async def changes(self, name: str, count: int = 20) -> list[Change]:
        """The newest ``count`` changes of job ``name`` (who changed what), newest first."""
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise ValueError(f"count must be a positive int, got {count!r}")
        await self._ensure_open()
        self._require_control()
        return [Change.decode(entry) for entry in await self.backend.change_log(name, count)]

    async def offered_handlers(self) -> dict[str, list[str]]:
        """The handler names each running instance offers (instance id -> names)."""
        await self._ensure_open()
        self._require_control()
        snapshot = await self.backend.read_controls()
        return {instance: list(names) for instance, names in snapshot.offers.items()}

    def _require_control(self) -> None:
        if not self.backend.supports_control:
            raise TypeError(f"backend {self.backend.name} does not support runtime control "
                            "(pause, reschedule, dynamic jobs): it only picks one winner "
                            "per slot; use a lease backend (Redis, Valkey, PostgreSQL, "
                            "SQLite)")

    async def _change(self, name: str, action: Action, mutate: Callable[[Control], Control],
                      detail: Mapping[str, Any], by: str | None, *,
                      new_job: bool = False) -> Change:
        check_job_name(name)
        if by is not None and (not isinstance(by, str) or not by.strip()):
            raise TypeError(f"by must be a non-empty str, got {by!r}")
        author = by or self.instance_id
        self._require_control()
        await self._ensure_open()
        for _ in range(MAX_TRIES):
            snapshot = await self.backend.read_controls()
            record = snapshot.records.get(name)
            current = Control() if record is None else Control.decode(record.text)
            if not new_job:
                await self._require_job(name, current)
            elif action == "add" and current.dynamic is None and \
                    await self._is_code_job(name):
                raise ValueError(f"job {name!r} is declared in code; a dynamic job needs a "
                                 "name of its own")
            changed = dataclasses.replace(mutate(current), action=action, by=author)
            if action == "add" and current.dynamic is not None and not current.removed:
                action = "update"
                changed = dataclasses.replace(changed, action=action)
            version = 0 if record is None else record.version
            entry = Change(name, version + 1, action, author,
                           ms_to_datetime(int(time.time() * 1000)), dict(detail))
            stored = await self.backend.change_control(
                ControlChange(name, version, changed.encode(), entry.encode()))
            if stored:
                self._emit("change", name, reason=f"{action} by {author}")
                if self.running:
                    await self._controls.refresh()  # this instance applies it at once
                return dataclasses.replace(entry, version=stored)
        raise StoreError(f"job {name!r}: {MAX_TRIES} concurrent changes in a row won "
                         "over this one; try again")

    async def _is_code_job(self, name: str) -> bool:
        if name in self._jobs and name not in self._controls.dynamic:
            return True
        return any(spec.name == name for spec in await self.backend.known_jobs()) and \
            name not in self._controls.dynamic

    async def _require_job(self, name: str, control: Control) -> None:
        if control.dynamic is not None and not control.removed:
            return
        if name in self._jobs or any(spec.name == name
                                     for spec in await self.backend.known_jobs()):
            return
        raise JobNotFoundError(f"no job named {name!r} in the store (registered by an "
                               "instance, or added with add_job())")

    # -- queries -------------------------------------------------------------------------

    def _info(self, job: Job) -> JobInfo:
        paused = job.name in self._controls.paused
        return JobInfo(job.name, job.schedule.kind, job.schedule.describe(),
                       None if paused else self.next_run(job.name), dict(job.explicit),
                       self._controls.host._claiming.backlog.skipped(job.name),
                       paused=paused, framework=job.framework)

    async def jobs(self) -> list[JobInfo]:
        """Jobs registered here, jobs other instances registered in the store, and
        dynamic jobs; each with its effective schedule, where it comes from, whether it
        is paused, and (dynamic jobs) the instances that can run it."""
        await self._ensure_open()
        snapshot = (await self.backend.read_controls() if self.backend.supports_control
                    else ControlSnapshot(0))
        infos: dict[str, JobInfo] = {}
        for job in self._jobs.values():
            infos[job.name] = self._info(job)
        known = await self.backend.known_jobs()
        for spec in known:
            if spec.name not in infos:
                infos[spec.name] = registered_info(spec)
        return with_registrations(describe_jobs(infos, snapshot, self.options), known,
                                  set(self._jobs), int(time.time() * 1000))


def registered_info(spec: JobSpec) -> JobInfo:
    """The description of a job only the store knows of (registered by another
    instance)."""
    return JobInfo(spec.name, spec.kind, spec.schedule, None, {}, framework=spec.framework)


def with_registrations(infos: list[JobInfo], known: list[JobSpec], declared: set[str],
                       now_ms: int) -> list[JobInfo]:
    """``infos`` with each job's last registration from ``known`` (the store's
    registrations) and whether it is gone (not in ``declared``, this process's jobs, and
    registered by nobody for ``GONE_AFTER_MS``; a store that keeps no registration times
    has no gone jobs)."""
    registered = {spec.name: spec.registered_ms for spec in known}
    out = []
    for info in infos:
        at = registered.get(info.name)
        out.append(dataclasses.replace(
            info, last_registered=None if at is None else ms_to_datetime(at),
            gone=at is not None and info.name not in declared and is_gone(at, now_ms)))
    return out


def describe_jobs(infos: dict[str, JobInfo], snapshot: ControlSnapshot,
                  options: SchedulerOptions) -> list[JobInfo]:
    """``infos`` (jobs registered here and in the store, by name) with the control
    records of ``snapshot`` applied, plus the dynamic jobs; sorted by name. For a layer
    that reads the store in its own thread (the Django admin on the ORM store)."""
    infos = dict(infos)
    for name, record in snapshot.records.items():
        try:
            control = Control.decode(record.text)
        except ValueError:
            continue
        if control.removed:
            infos.pop(name, None)
            continue
        info = infos.get(name)
        if info is None and control.dynamic is None:
            continue  # a record of a job no instance registers any more
        infos[name] = _controlled(name, info, control, record.version, snapshot, options)
    return sorted(infos.values(), key=lambda info: info.name)


def _controlled(name: str, info: JobInfo | None, control: Control, version: int,
                snapshot: ControlSnapshot, options: SchedulerOptions) -> JobInfo:
    """A job's description with its control record applied."""
    kind, schedule = (info.kind, info.schedule) if info is not None else ("", "")
    next_run = info.next_run if info is not None else None
    if control.schedule is not None:
        kind, schedule = control.schedule.kind, control.schedule.describe()
        next_run = _next_run(name, control.schedule, options)
    dynamic = control.dynamic
    runnable = () if dynamic is None else tuple(sorted(
        instance for instance, names in snapshot.offers.items() if dynamic.handler in names))
    framework = (handler_framework(dynamic.handler) if dynamic is not None
                 else info.framework if info is not None else None)
    return JobInfo(
        name, kind, schedule, None if control.paused else next_run,
        dict(dynamic.options) if dynamic is not None else
        dict(info.options) if info is not None else {},
        dict(info.skipped) if info is not None else {},
        paused=control.paused, source=control.source, version=version,
        handler=None if dynamic is None else dynamic.handler,
        params=None if dynamic is None else dynamic.params, runnable_by=runnable,
        framework=framework)


def _next_run(name: str, spec: ScheduleSpec, options: SchedulerOptions) -> datetime | None:
    try:
        schedule = resolve_job(spec.kind, name, spec.when, spec.options(),
                               scheduler=options).schedule
    except (TypeError, ValueError):
        return None
    slot = schedule.next_after(int(time.time() * 1000))
    return None if slot is None else ms_to_datetime(slot)


__all__ = ["RuntimeControl", "describe_jobs", "registered_info", "with_registrations"]
