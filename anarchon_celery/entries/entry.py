"""``anarchon_celery.Entry``: beat entries saved at run time, picked up by every beat.

An entry is a dynamic job of the core (``add_job()``) in the store the app's beats use,
run by the ``celery:publish`` handler every anarchon beat offers. ``save()`` has
returned once the store holds the change: from then on no beat publishes a slot of the
entry's old schedule, and every running beat applies it within one heartbeat.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from anarchon import Scheduler as CoreScheduler
from anarchon.backends.capabilities import ControlStore
from anarchon.control.changes import Control
from anarchon.jobs.name_checks import check_job_name
from anarchon.schedules.kinds import ms_to_datetime
from anarchon_celery.beat.config import resolve
from anarchon_celery.entries.dynamic import (
    HANDLER,
    EntryError,
    Params,
    celery_schedule,
    check_serializable,
    crontab_zone,
    schedule_arguments,
)
from anarchon_celery.schedules import timing
from anarchon_celery.schedules.convert import PACKAGE_OPTIONS, app_timezone

#: the default entry Celery beat installs itself (a name an entry cannot take)
_DEFAULT_ENTRIES = ("celery.backend_cleanup",)


def code_entries(app: Any) -> dict[str, Any]:
    """The app's ``beat_schedule`` entries (name -> dict)."""
    schedule = app.conf.beat_schedule or {}
    return {str(name): entry for name, entry in schedule.items()}


@contextmanager
def core_for(app: Any) -> Iterator[CoreScheduler]:
    """A core scheduler on the app's store (the Scheduler's settings), not started;
    closed after use."""
    settings = resolve(app)
    core = CoreScheduler(settings.build_backend(), **dict(settings.scheduler_options))
    try:
        yield core
    finally:
        core.close()


@contextmanager
def _core(app: Any, given: CoreScheduler | None) -> Iterator[CoreScheduler]:
    if given is not None:
        yield given
        return
    with core_for(app) as core:
        yield core


@dataclass
class Entry:
    """A beat entry stored at run time: ``Entry(app, "report", "proj.report",
    crontab(hour=3)).save()``.

    ``schedule``: seconds or a ``timedelta`` (every, on the UTC grid), a ``crontab`` (in
    ``options["anarchon"]["timezone"]``, else ``anarchon_scheduler["timezone"]``, else
    the app's timezone), or a ``datetime`` (once;
    a naive one is read in that timezone). A ``solar``, and a ``crontab`` restricting both
    day fields, keep Celery's rules (stored as the ``celery.solar``/``celery.crontab``
    schedule types); other custom schedules and ``relative=True`` are refused (put those
    in ``beat_schedule``). ``args``,
    ``kwargs`` and ``options`` (``queue``, ``routing_key``, ``priority``, ``expires``,
    ``headers`` …; job options under ``options["anarchon"]``) must serialise with the
    app's ``task_serializer`` and as JSON: they are stored, so never put secrets there.
    ``enabled=False`` stores the entry paused.

    Entries from ``beat_schedule`` come back from ``all()`` and ``load()`` with
    ``read_only=True``: they change in code, not here. Read back, ``schedule`` is a
    Celery schedule object bound to the app (a ``schedule``, a ``crontab`` carrying its
    stored zone as ``tz``, a ``solar``; a one-off entry's ``datetime``), and
    ``next_run()``/``remaining_estimate()``/``is_due()`` answer by the definition the
    beats run.
    """

    app: Any
    name: str
    task: str
    schedule: Any
    args: Any = ()
    kwargs: Mapping[str, Any] | None = None
    options: Mapping[str, Any] | None = None
    enabled: bool = True
    #: a ``beat_schedule`` entry (``save()``/``delete()`` refuse it)
    read_only: bool = field(default=False, compare=False)
    #: the stored record's version (``None``: not saved)
    version: int | None = field(default=None, compare=False)
    #: the scheduled instant of the last slot the beats published (``load()`` reads it
    #: from the store's history; ``None``: none, or not read)
    last_run_at: datetime | None = field(default=None, compare=False)

    # -- timing (Celery's ScheduleEntry face) -----------------------------------------------

    def next_run(self, after: datetime | None = None) -> datetime | None:
        """The first slot after ``after`` (default now) by the definition the beats run."""
        return timing.next_run(self, after)

    def remaining_estimate(self, last_run_at: datetime | None = None) -> timedelta | None:
        """From now until the run after ``last_run_at`` (default ``self.last_run_at``,
        else now), by the definition the beats run; ``None`` when no run is left."""
        return timing.remaining_estimate(self, last_run_at)

    def is_due(self, last_run_at: datetime | None = None) -> tuple[bool, float]:
        """``schedstate(is_due, next)`` as Celery's ``ScheduleEntry.is_due()``, by the
        definition the beats run (see ``anarchon_celery.schedules.timing``)."""
        return timing.is_due(self, last_run_at)

    # -- writing -----------------------------------------------------------------------------

    def job_arguments(self) -> dict[str, Any]:
        """``add_job()``'s arguments for this entry; raises
        [`EntryError`][anarchon_celery.EntryError] naming what is wrong."""
        self._check_writable()
        if not isinstance(self.task, str) or not self.task.strip():
            raise EntryError(f"entry {self.name!r}: task must be a task name (str), got "
                             f"{self.task!r}")
        if isinstance(self.args, (str, bytes)) or not _is_sequence(self.args):
            raise EntryError(f"entry {self.name!r}: args must be a list or tuple, got "
                             f"{self.args!r}")
        for what, value in (("kwargs", self.kwargs), ("options", self.options)):
            if value is not None and not isinstance(value, Mapping):
                raise EntryError(f"entry {self.name!r}: {what} must be a dict, got {value!r}")
        options = dict(self.options or {})
        job_options = dict(options.get("anarchon") or {})
        unknown = sorted(set(job_options) & set(PACKAGE_OPTIONS))
        if unknown:
            raise EntryError(f"entry {self.name!r}: options['anarchon'] {unknown} apply to "
                             "beat_schedule entries only")
        settings = resolve(self.app)
        when = self.schedule_arguments(job_options.pop("timezone", None))
        params = Params(self.task, tuple(self.args), dict(self.kwargs or {}), options)
        check_serializable(self.name, params, self.app)
        if "at" in when:
            pass  # one run: nothing overlaps
        elif not settings.track:
            # the run is only the publish (as for beat_schedule entries): a publish still
            # retrying must not make the next slot skip
            job_options.setdefault("overlap", "allow")
        elif not settings.resend:
            job_options.setdefault("max_attempts", 1)
        return {"handler": HANDLER, "params": params.to_json(), **when, **job_options}

    def schedule_arguments(self, own_zone: Any = None) -> dict[str, Any]:
        """``add_job()``'s schedule arguments for this entry (``every``, ``cron`` and
        ``timezone``, ``at`` or ``custom``). A crontab's zone: ``own_zone`` (the entry's
        ``options["anarchon"]["timezone"]``), else the zone the crontab carries (its
        ``tz``, when not the app's: a loaded entry's crontab carries its stored zone),
        else ``anarchon_scheduler["timezone"]``, else the app's timezone."""
        if own_zone is not None and not _is_crontab(self.schedule):
            raise EntryError(f"entry {self.name!r}: options['anarchon']['timezone'] only "
                             "applies to crontab schedules")
        tz = app_timezone(self.app)
        if own_zone is None and _is_crontab(self.schedule):
            own_zone = crontab_zone(self.schedule, tz)
        zone = own_zone or resolve(self.app).scheduler_options.get("timezone")
        if zone:
            from anarchon.schedules.kinds import load_timezone

            try:
                tz = load_timezone(str(zone), job=self.name)
            except (TypeError, ValueError) as exc:
                raise EntryError(f"entry {self.name!r}: {exc}") from None
        return schedule_arguments(self.name, self.schedule, tz)

    def _check_writable(self) -> None:
        check_job_name(self.name)
        if self.read_only or self.name in code_entries(self.app) \
                or self.name in _DEFAULT_ENTRIES:
            raise EntryError(f"entry {self.name!r} is defined in the app's beat_schedule: it "
                             "changes in code; give the dynamic entry another name")

    def save(self, *, core: CoreScheduler | None = None,
             by: str = "anarchon_celery.Entry") -> Entry:
        """Store the entry (add or update); returns it with its new ``version``.

        ``core``: a scheduler on the beats' store to write with (default: one on the app's
        store, closed after use); ``by``: the author in the job's change log."""
        arguments = self.job_arguments()
        with _core(self.app, core) as core:
            current = _stored(core).get(self.name)
            if current is not None and (current.dynamic is None
                                        or current.dynamic.handler != HANDLER) \
                    and not current.removed:
                raise EntryError(f"job {self.name!r} exists in the store and is not a Celery "
                                 "entry; give the entry another name")
            change = core.add_job(self.name, replace=True, paused=not self.enabled,
                                  by=by, **arguments)
            if self.enabled and current is not None and current.paused \
                    and not current.removed:
                change = core.resume(self.name, by=by)
        self.version = change.version
        return self

    def delete(self, *, core: CoreScheduler | None = None,
               by: str = "anarchon_celery.Entry") -> None:
        """Remove the entry from every beat (its run history stays); ``core`` and ``by``
        as for ``save()``."""
        self._check_writable()
        with _core(self.app, core) as core:
            current = _stored(core).get(self.name)
            if current is None or current.removed or current.dynamic is None \
                    or current.dynamic.handler != HANDLER:
                raise LookupError(f"no stored Celery entry named {self.name!r}")
            core.remove_job(self.name, by=by)
        self.version = None

    # -- reading -----------------------------------------------------------------------------

    @classmethod
    def load(cls, app: Any, name: str) -> Entry:
        """The entry ``name``: stored, or from ``beat_schedule`` (read-only); raises
        ``LookupError`` when there is none."""
        code = code_entries(app)
        if name in code:
            return _from_code(app, name, code[name])
        with core_for(app) as core:
            stored = _stored_versions(core)
            if name not in stored:
                raise LookupError(f"no Celery entry named {name!r} (neither stored nor "
                                  "in beat_schedule)")
            entry = _from_record(app, name, *stored[name])
            if entry is None:
                raise LookupError(f"job {name!r} in the store is not a Celery entry")
            entry.last_run_at = _last_run(core, name)
        return entry

    @classmethod
    def all(cls, app: Any) -> list[Entry]:
        """Every entry by name: the stored ones and the ``beat_schedule`` ones
        (``read_only=True``)."""
        entries = {name: _from_code(app, name, spec)
                   for name, spec in code_entries(app).items()}
        with core_for(app) as core:
            for name, (control, version) in _stored_versions(core).items():
                entry = _from_record(app, name, control, version)
                if entry is not None and name not in entries:
                    entries[name] = entry
        return [entries[name] for name in sorted(entries)]


def _is_crontab(value: Any) -> bool:
    from celery.schedules import crontab

    return isinstance(value, crontab)


def _is_sequence(value: Any) -> bool:
    return isinstance(value, (list, tuple))


def _stored_versions(core: CoreScheduler) -> dict[str, tuple[Control, int]]:
    """Every readable control record in the store: name -> (control, version)."""
    core.jobs()  # opens the store connection (and says so when control is unsupported)
    if not isinstance(core.backend, ControlStore):
        raise EntryError(f"backend {core.backend.name} keeps no dynamic entries: use a "
                         "lease store (Redis, Valkey, PostgreSQL, SQLite)")
    snapshot = core.run_coroutine(core.backend.read_controls())
    result: dict[str, tuple[Control, int]] = {}
    for name, record in snapshot.records.items():
        try:
            result[name] = (Control.decode(record.text), record.version)
        except ValueError:
            continue
    return result


def _stored(core: CoreScheduler) -> dict[str, Control]:
    return {name: control for name, (control, _) in _stored_versions(core).items()}


def _from_record(app: Any, name: str, control: Control, version: int) -> Entry | None:
    dynamic = control.dynamic
    if control.removed or dynamic is None or dynamic.handler != HANDLER \
            or control.schedule is None:
        return None
    try:
        params = Params.from_json(dynamic.params)
    except EntryError:
        return None
    return Entry(app, name, params.task, celery_schedule(control.schedule, app),
                 list(params.args), dict(params.kwargs or {}), dict(params.options or {}),
                 enabled=not control.paused, version=version)


def _last_run(core: CoreScheduler, name: str) -> datetime | None:
    """The scheduled instant of the last slot published (not a skip record, not a
    manual run)."""
    for record in core.history(name, 20):
        if record.status != "skipped" and not record.manual:
            return ms_to_datetime(record.slot)
    return None


def _from_code(app: Any, name: str, spec: Any) -> Entry:
    from celery.schedules import maybe_schedule

    if not isinstance(spec, Mapping):
        return Entry(app, name, str(getattr(spec, "task", "")), getattr(spec, "schedule", None),
                     read_only=True)
    given = spec.get("schedule")
    return Entry(app, name, str(spec.get("task", "")),
                 given if given is None else maybe_schedule(given, bool(spec.get("relative")),
                                                            app=app),
                 list(spec.get("args") or ()), dict(spec.get("kwargs") or {}),
                 dict(spec.get("options") or {}), read_only=True)


__all__ = ["Entry", "EntryError", "code_entries", "core_for"]
