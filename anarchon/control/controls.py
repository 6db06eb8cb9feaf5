"""One instance's view of the control records, applied to its jobs.

The store's generation number comes with every trigger poll; when it moved, or a
``changed`` wake-up arrived, or the store refused a claim as ``stale``, the instance reads
every record again and applies what changed: pauses, schedule overrides (a code job's
schedule replaced until reset) and dynamic jobs (started here when this instance has
their handler). Claims carry the version of the record they were planned from, so the
store refuses any claim planned before a change it already holds.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Callable

from ..backends.capabilities import ControlStore, as_control
from ..backends.control import ControlRecord, ControlSnapshot
from ..backends.frameworks import handler_framework
from ..engine.runtime import Runtime, job_spec
from ..jobs.definition import Handler, Job, resolve_job
from .changes import Control

logger = logging.getLogger("anarchon")

#: an instance re-writes its handler offer this often (seconds): one call per hour keeps
#: it listed (offers expire after ``OFFER_TTL_MS``)
OFFER_EVERY = 3600.0


class Controls:
    """The control records as this instance last read them, applied to its jobs."""

    def __init__(self, runtime: Runtime, *, schedule: Callable[[Job], None],
                 unplan: Callable[[str], None],
                 on_loop: Callable[[Callable[[], None]], None],
                 listen: Callable[[], None]) -> None:
        self.runtime = runtime
        #: plans a job's slots from now; ``unplan`` drops its planned slot
        self._schedule = schedule
        self._unplan = unplan
        #: runs a function on the scheduler's loop (handlers may be added from any thread)
        self._on_loop = on_loop
        #: starts the trigger poll and the wake-up watch if they wait for a first job or
        #: handler (``anarchon.engine.wake_channel``)
        self._listen = listen
        #: the generation of the snapshot applied last (None: none read yet)
        self.generation: int | None = None
        self.records: dict[str, ControlRecord] = {}
        self.controls: dict[str, Control] = {}
        self.paused: set[str] = set()
        #: when this instance applied each job's last resume (its clock, epoch ms)
        self.resumed_at: dict[str, int] = {}
        #: code jobs whose schedule an override replaced, as the code declared them
        self.declared: dict[str, Job] = {}
        #: dynamic jobs scheduled here
        self.dynamic: set[str] = set()
        #: handler name -> callable, for dynamic jobs (``handler()``)
        self.handlers: dict[str, Handler] = {}
        #: the version each job's plan was last made from: a planned slot of an older
        #: version whose schedule did not change since (a pause, a resume) is claimed
        #: with the current version, not refused as stale once
        self.planned: dict[str, int] = {}
        self._warned: set[tuple[str, str]] = set()
        self._lock = asyncio.Lock()
        self._offered_at: float | None = None
        self._applying = 0  # the version of the record being applied

    @property
    def enabled(self) -> bool:
        return isinstance(self.runtime.backend, ControlStore)

    def version(self, name: str) -> int:
        """The version of job ``name``'s record as last read (0: no record)."""
        record = self.records.get(name)
        return 0 if record is None else record.version

    # -- reading -------------------------------------------------------------------------

    async def refresh(self) -> None:
        """Read every record and apply what changed since the last read."""
        async with self._lock:
            self.apply(await as_control(self.runtime.backend).read_controls())

    async def seen(self, generation: int) -> None:
        """The store's generation as a poll saw it: read the records if it moved."""
        if generation != self.generation:
            await self.refresh()

    def apply(self, snapshot: ControlSnapshot) -> None:
        """Apply a snapshot: every record whose version differs from the last one."""
        before, first = self.records, self.generation is None and not self.records
        self.records = dict(snapshot.records)
        self.generation = snapshot.generation
        for name in sorted(set(before) | set(self.records)):
            old, new = before.get(name), self.records.get(name)
            if old is not None and new is not None and old.version == new.version:
                continue
            try:
                control = Control() if new is None else Control.decode(new.text)
            except ValueError as exc:
                self._warn(name, "unreadable", "job %r: %s; its control record is ignored",
                           name, exc)
                continue
            self.controls[name] = control
            self._applying = 0 if new is None else new.version
            self._apply_one(name, control)
            if new is not None and control.action and not first:  # not the state at start
                self.runtime.emit("change", name, reason=f"{control.action} by {control.by}")

    def holds_back(self, name: str, slot: int) -> bool:
        """Whether slot ``slot`` of job ``name`` is skipped as paused: the job is paused,
        or the slot fell due before this instance applied the job's resume (a slot of the
        paused time whose claim comes late, e.g. on a busy loop: ``resume()`` schedules
        the job again from its next slot)."""
        return name in self.paused or slot < self.resumed_at.get(name, 0)

    def adopt(self, job: Job) -> Job:
        """A code job registered here: its schedule as the stored override says."""
        control = self.controls.get(job.name)
        if control is None or control.dynamic is not None or control.schedule is None:
            return job
        self.declared[job.name] = job
        return self._overridden(job, control)

    def forget(self, name: str) -> None:
        """Job ``name`` was removed from this instance by ``remove()``."""
        self.declared.pop(name, None)
        self.dynamic.discard(name)

    # -- applying ------------------------------------------------------------------------

    def _apply_one(self, name: str, control: Control) -> None:
        if control.paused and not control.removed:
            self.paused.add(name)
        else:
            if name in self.paused:  # resumed: slots due until now stay skipped
                self.resumed_at[name] = self.runtime.now_ms()
            self.paused.discard(name)
        jobs = self.runtime.jobs
        if control.dynamic is not None and not control.removed:
            if name in jobs and name not in self.dynamic:
                self._warn(name, "code", "job %r: a dynamic job has the name of a job "
                           "declared in code here; the code's job is kept", name)
                return
            handler = self.handlers.get(control.dynamic.handler)
            if handler is None:
                self._warn(name, "handler:" + control.dynamic.handler,
                           "job %r: this instance has no handler %r; it does not run the "
                           "job (jobs() lists the instances that can)",
                           name, control.dynamic.handler)
                self._uninstall(name)
                return
            job = self._build_dynamic(name, control, handler)
            if job is not None:
                self.dynamic.add(name)
                self._install(job)
            return
        if name in self.dynamic:  # removed, or turned into a plain record
            self._uninstall(name)
            return
        base = self.declared.get(name) or jobs.get(name)
        if base is None:
            return  # not a job of this instance
        if control.schedule is not None:
            self.declared.setdefault(name, base)
            self._install(self._overridden(self.declared[name], control))
        elif name in self.declared:
            self._install(self.declared.pop(name))

    def _overridden(self, job: Job, control: Control) -> Job:
        assert control.schedule is not None
        spec = control.schedule
        try:
            schedule = resolve_job(spec.kind, job.name, spec.when, spec.options(),
                                   scheduler=self.runtime.options).schedule
        except (TypeError, ValueError) as exc:
            self._warn(job.name, "override", "job %r: its stored schedule %s cannot be "
                       "used (%s); the code's schedule is kept", job.name, spec.describe(),
                       exc)
            return job
        return dataclasses.replace(job, schedule=schedule)

    def _build_dynamic(self, name: str, control: Control, handler: Handler) -> Job | None:
        assert control.dynamic is not None and control.schedule is not None
        spec, dynamic = control.schedule, control.dynamic
        try:
            job = resolve_job(spec.kind, name, spec.when,
                              {**dynamic.options, **spec.options()}, handler=handler,
                              scheduler=self.runtime.options, backend=self.runtime.backend)
        except (TypeError, ValueError) as exc:
            self._warn(name, "dynamic", "dynamic job %r cannot be scheduled here: %s",
                       name, exc)
            return None
        return dataclasses.replace(job, handler=handler, params=dynamic.params,
                                   framework=handler_framework(dynamic.handler))

    def claim_version(self, name: str, planned: int) -> int:
        """The version to claim a slot of job ``name`` planned from version ``planned``
        with: the current one if the job's plan has not been remade since."""
        return self.version(name) if planned >= self.planned.get(name, 0) else planned

    def _install(self, job: Job) -> None:
        runtime = self.runtime
        runtime.jobs.put(job)
        self.planned[job.name] = self._applying
        if runtime.running:
            if job.name in self.dynamic:
                runtime.spawn(runtime.backend.register([job_spec(job)]))
            self._schedule(job)

    def _uninstall(self, name: str) -> None:
        if name in self.dynamic:
            self.dynamic.discard(name)
            self.runtime.jobs.drop(name)
            self._unplan(name)

    def _warn(self, name: str, what: str, message: str, *args: object) -> None:
        if (name, what) not in self._warned:
            self._warned.add((name, what))
            logger.warning(message, *args)

    # -- handler offers ------------------------------------------------------------------

    def add_handler(self, name: str, handler: Handler) -> None:
        """``handler()`` was called: on a running instance, offer it and read the
        records again (a dynamic job waiting for this handler starts now)."""
        self.handlers[name] = handler
        if self.runtime.running and self.enabled:
            self.records, self.generation = {}, None  # every record is applied again
            def spawn() -> None:
                self._listen()  # the first handler: changes are heard from now on
                self.runtime.spawn(self._handler_added())

            self._on_loop(spawn)

    async def _handler_added(self) -> None:
        try:
            await self.offer(force=True)
            await self.refresh()
        except Exception as exc:
            self.runtime.emit("error", None, error=exc)

    async def offer(self, force: bool = False) -> None:
        """Tell the store which handlers this instance offers (hourly, or now)."""
        if not self.enabled or not self.handlers:
            return
        now = time.monotonic()
        if force or self._offered_at is None or now - self._offered_at > OFFER_EVERY:
            await as_control(self.runtime.backend).offer_handlers(
                self.runtime.instance_id, sorted(self.handlers))
            self._offered_at = now

    async def withdraw(self) -> None:
        """At stop: remove this instance's handler offer (best effort)."""
        if self._offered_at is not None:
            self._offered_at = None
            try:
                await asyncio.wait_for(
                    as_control(self.runtime.backend).offer_handlers(
                        self.runtime.instance_id, []), 2.0)
            except Exception:  # the store is down: the offer expires by itself
                logger.debug("handler offer of %s not withdrawn", self.runtime.instance_id)


__all__ = ["Controls"]
