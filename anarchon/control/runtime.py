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
from collections.abc import Awaitable, Callable, Collection, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..backends.base import Backend, JobSpec
from ..backends.capabilities import ControlStore, as_control
from ..backends.control import ControlChange, ControlSnapshot
from ..backends.frameworks import handler_framework
from ..backends.trigger_rules import is_gone
from ..engine.runtime import Emit
from ..errors import JobNotFoundError, StoreError
from ..history import JobInfo
from ..jobs.definition import Job, SchedulerOptions, resolve_job
from ..jobs.name_checks import check_job_name
from ..schedules.described import next_slot_ms
from ..schedules.kinds import ms_to_datetime
from .changes import (
    Action,
    Change,
    Control,
    Dynamic,
    ScheduleSpec,
    check_dynamic_options,
    check_params,
)

if TYPE_CHECKING:
    from ..engine.backlog import Backlog
    from .controls import Controls

#: a change that lost this many compare-and-sets in a row to concurrent changes gives up
MAX_TRIES = 20


class RuntimeControl:
    """The runtime-control calls of [`AsyncScheduler`][anarchon.AsyncScheduler], on one
    view of the store (the scheduler's own, or another through ``on_store()``)."""

    def __init__(self, backend: Backend, options: SchedulerOptions, instance_id: str,
                 jobs: Mapping[str, Job], controls: Controls, backlog: Backlog, emit: Emit,
                 *, ensure_open: Callable[[], Awaitable[None]],
                 next_run: Callable[[str], datetime | None],
                 running: Callable[[], bool]) -> None:
        self.backend = backend
        self.options = options
        self.instance_id = instance_id
        #: the scheduler's jobs (read only) and its control records as applied
        self.jobs_here = jobs
        self.controls = controls
        #: the slots given up, counted per job (``JobInfo.skipped``)
        self.backlog = backlog
        self.emit = emit
        #: connects to the store on demand
        self.ensure_open = ensure_open
        self.next_run = next_run
        #: the scheduler runs: a change it made is applied at once
        self.running = running

    def on_store(self, backend: Backend, ensure_open: Callable[[], Awaitable[None]]
                 ) -> RuntimeControl:
        """The same calls on another view of ``backend``'s store (a framework's own
        connection and transaction), never applying a change here."""
        return RuntimeControl(backend, self.options, self.instance_id, self.jobs_here,
                              self.controls, self.backlog, self.emit,
                              ensure_open=ensure_open, next_run=self.next_run,
                              running=lambda: False)

    # -- changes -------------------------------------------------------------------------

    async def pause(self, name: str, *, by: str | None = None) -> Change:
        """See the scheduler's method of this name (``control.calls``)."""
        return await self.change(name, "pause", lambda c: dataclasses.replace(c, paused=True),
                                  {}, by)

    async def resume(self, name: str, *, by: str | None = None) -> Change:
        """See the scheduler's method of this name (``control.calls``)."""
        return await self.change(name, "resume",
                                  lambda c: dataclasses.replace(c, paused=False), {}, by)

    async def reschedule(self, name: str, *, every: Any = None, cron: str | None = None,
                         timezone: str | None = None, offset: Any = None,
                         custom: Any = None, reset: bool = False,
                         by: str | None = None) -> Change:
        """See the scheduler's method of this name (``control.calls``)."""
        if reset:
            if any(v is not None for v in (every, cron, timezone, offset, custom)):
                raise TypeError(f"job {name!r}: reset=True takes no schedule")

            def back(control: Control) -> Control:
                if control.dynamic is not None:
                    raise ValueError(f"job {name!r} is a dynamic job: it has no schedule in "
                                     "code to go back to; give a new schedule instead")
                return dataclasses.replace(control, schedule=None)

            return await self.change(name, "reset", back, {}, by)
        spec = ScheduleSpec.choose(every=every, cron=cron, timezone=timezone, offset=offset,
                                   custom=custom, job=name)
        if spec.kind == "at":
            raise TypeError(f"job {name!r}: reschedule takes every=, cron= or custom=")
        resolve_job(spec.kind, name, spec.when, spec.options(), scheduler=self.options,
                    backend=self.backend)
        return await self.change(name, "reschedule",
                                  lambda c: dataclasses.replace(c, schedule=spec),
                                  {"schedule": spec.describe()}, by)

    async def add_job(self, name: str, *, handler: str, every: Any = None,
                      cron: str | None = None, at: Any = None, timezone: str | None = None,
                      offset: Any = None, custom: Any = None, params: Any = None,
                      replace: bool = False, paused: bool = False, by: str | None = None,
                      **options: Any) -> Change:
        """See the scheduler's method of this name (``control.calls``)."""
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
        return await self.change(name, "add", add, detail, by, new_job=True)

    async def remove_job(self, name: str, *, by: str | None = None) -> Change:
        """See the scheduler's method of this name (``control.calls``)."""
        def remove(control: Control) -> Control:
            if control.dynamic is None or control.removed:
                raise ValueError(f"job {name!r} is not a dynamic job; a job declared in "
                                 "code is removed from the code (pause() stops it now)")
            return Control(removed=True)

        return await self.change(name, "remove", remove, {}, by, new_job=True)

    async def changes(self, name: str, count: int = 20) -> list[Change]:
        """See the scheduler's method of this name (``control.calls``)."""
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise ValueError(f"count must be a positive int, got {count!r}")
        await self.ensure_open()
        store = self._require_control()
        return [Change.decode(entry) for entry in await store.change_log(name, count)]

    async def offered_handlers(self) -> dict[str, list[str]]:
        """See the scheduler's method of this name (``control.calls``)."""
        await self.ensure_open()
        snapshot = await self._require_control().read_controls()
        return {instance: list(names) for instance, names in snapshot.offers.items()}

    def _require_control(self) -> ControlStore:
        return as_control(self.backend, "backend {name} does not support runtime "
                       "control (pause, reschedule, dynamic jobs): it only picks one winner "
                       "per slot; use a lease backend (Redis, Valkey, PostgreSQL, SQLite)")

    async def change(self, name: str, action: Action, mutate: Callable[[Control], Control],
                      detail: Mapping[str, Any], by: str | None, *,
                      new_job: bool = False) -> Change:
        check_job_name(name)
        if by is not None and (not isinstance(by, str) or not by.strip()):
            raise TypeError(f"by must be a non-empty str, got {by!r}")
        author = by or self.instance_id
        store = self._require_control()
        await self.ensure_open()
        for _ in range(MAX_TRIES):
            snapshot = await store.read_controls()
            record = snapshot.records.get(name)
            current = Control() if record is None else Control.decode(record.text)
            if not new_job:
                await self._require_job(name, current)
            elif action == "add" and current.dynamic is None and \
                    await self._is_code_job(name, current):
                raise ValueError(f"job {name!r} is declared in code; a dynamic job needs a "
                                 "name of its own")
            changed = dataclasses.replace(mutate(current), action=action, by=author)
            if action == "add" and current.dynamic is not None and not current.removed:
                action = "update"
                changed = dataclasses.replace(changed, action=action)
            version = 0 if record is None else record.version
            entry = Change(name, version + 1, action, author,
                           ms_to_datetime(int(time.time() * 1000)), dict(detail))
            stored = await store.change_control(
                ControlChange(name, version, changed.encode(), entry.encode()))
            if stored:
                self.emit("change", name, reason=f"{action} by {author}")
                if self.running():
                    await self.controls.refresh()  # this instance applies it at once
                return dataclasses.replace(entry, version=stored)
        raise StoreError(f"job {name!r}: {MAX_TRIES} concurrent changes in a row won "
                         "over this one; try again")

    async def _is_code_job(self, name: str, control: Control) -> bool:
        """Whether job ``name`` is declared in code: here, or by an instance that
        registered it in the store. A name whose control record is (or was, until
        ``remove_job()``) a dynamic job's is not: its registrations are the ones the
        instances running that dynamic job wrote, so a removed dynamic job's name is free
        again at once (the same rule ``jobs()`` follows: it lists no removed job)."""
        if name in self.controls.dynamic:
            return False
        if name in self.jobs_here:
            return True
        if control.dynamic is not None or control.removed:
            return False
        return any(spec.name == name for spec in await self.backend.known_jobs())

    async def _require_job(self, name: str, control: Control) -> None:
        if control.dynamic is not None and not control.removed:
            return
        if await self._is_code_job(name, control):
            return
        gone = " (a dynamic job removed with remove_job())" if control.removed else ""
        raise JobNotFoundError(f"no job named {name!r} in the store{gone} (registered by "
                               "an instance, or added with add_job())")

    async def listed(self, name: str) -> bool:
        """Whether ``jobs()`` lists job ``name`` (one job: without describing them all)."""
        if name in self.jobs_here and name not in self.controls.dynamic:
            return True
        control = Control()
        if isinstance(self.backend, ControlStore):
            record = (await self.backend.read_controls()).records.get(name)
            if record is not None:
                try:
                    control = Control.decode(record.text)
                except ValueError:
                    control = Control()
        if control.dynamic is not None and not control.removed:
            return True
        return await self._is_code_job(name, control)

    # -- queries -------------------------------------------------------------------------

    def info(self, job: Job) -> JobInfo:
        paused = job.name in self.controls.paused
        return JobInfo(job.name, job.schedule.kind, job.schedule.describe(),
                       None if paused else self.next_run(job.name), dict(job.explicit),
                       self.backlog.skipped(job.name),
                       paused=paused, framework=job.framework)

    async def jobs(self) -> list[JobInfo]:
        """See the scheduler's method of this name (``control.calls``)."""
        await self.ensure_open()
        snapshot = (await self.backend.read_controls()
                    if isinstance(self.backend, ControlStore) else ControlSnapshot(0))
        infos: dict[str, JobInfo] = {}
        for job in self.jobs_here.values():
            infos[job.name] = self.info(job)
        known = await self.backend.known_jobs()
        for spec in known:
            if spec.name not in infos:
                infos[spec.name] = registered_info(spec)
        declared = set(self.jobs_here) - self.controls.dynamic
        return with_registrations(describe_jobs(infos, snapshot, self.options, declared),
                                  known, set(self.jobs_here), int(time.time() * 1000))


def registered_info(spec: JobSpec) -> JobInfo:
    """The description of a job only the store knows of (registered by another
    instance), its next slot read from the stored schedule (``None`` for a custom kind)."""
    slot = next_slot_ms(spec.kind, spec.schedule, int(time.time() * 1000))
    return JobInfo(spec.name, spec.kind, spec.schedule,
                   None if slot is None else ms_to_datetime(slot), {},
                   framework=spec.framework)


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
                  options: SchedulerOptions,
                  declared: Collection[str] = ()) -> list[JobInfo]:
    """``infos`` (jobs registered here and in the store, by name) with the control
    records of ``snapshot`` applied, plus the dynamic jobs; sorted by name. A removed
    dynamic job is left out (the registrations its instances wrote too), unless
    ``declared`` (the names this process declares in code) holds its name. For a layer
    that reads the store in its own thread (the Django admin on the ORM store)."""
    infos = dict(infos)
    for name, record in snapshot.records.items():
        try:
            control = Control.decode(record.text)
        except ValueError:
            continue
        if control.removed:
            if name not in declared:
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
