"""Dynamic entries as core dynamic jobs: their schedule, their params, their handler.

Every anarchon beat offers one handler, [`HANDLER`][anarchon_celery.entries.dynamic.HANDLER]
(``celery:publish``): it publishes the task named in the job's params
(``{task, args, kwargs, options}``), so any beat can run any entry saved with
[`Entry`][anarchon_celery.Entry].
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from anarchon import AsyncScheduler, RunContext, parse_duration
from anarchon.control.changes import ScheduleSpec
from anarchon.errors import JobNotFoundError
from anarchon.schedules.kinds import (
    AtSchedule,
    CronSchedule,
    EverySchedule,
    Schedule,
    ms_to_datetime,
)
from anarchon_celery.beat.config import ConfigurationError
from anarchon_celery.schedules.crontab import (
    CRONTAB_TYPE,
    CeleryCrontabSchedule,
    crontab_data,
    crontab_expression,
)
from anarchon_celery.schedules.solar import SOLAR_TYPE, CelerySolarSchedule, solar_data
from anarchon_celery.tasks.manual import Values
from anarchon_celery.tasks.outcomes import OutcomeWatch
from anarchon_celery.tasks.publish import Publisher

#: the handler name every anarchon beat offers for dynamic entries
HANDLER = "celery:publish"
_CRON_FIELDS = ("minute", "hour", "day_of_month", "month_of_year", "day_of_week")


class EntryError(ValueError):
    """A dynamic entry that cannot be stored as given (the message says what and why)."""


def schedule_arguments(name: str, schedule: Any, tz: ZoneInfo) -> dict[str, Any]:
    """``add_job()``'s schedule arguments for a Celery schedule, or ``EntryError``.

    Numbers, ``timedelta`` and a plain ``celery.schedules.schedule`` run ``every`` (on the
    UTC grid); ``crontab`` runs ``cron`` in its zone ``tz``; an aware or naive (read in
    ``tz``) ``datetime`` runs once ``at`` it. A ``solar``, and a ``crontab`` restricting
    both day fields (Celery ANDs them, cron ORs them), are stored as this package's
    schedule types (``celery.solar``, ``celery.crontab``), which every beat registers.
    Other custom schedules are refused: their own ``is_due`` decides, which is code.
    """
    from celery.schedules import crontab, solar
    from celery.schedules import schedule as interval

    if isinstance(schedule, bool):
        raise EntryError(f"entry {name!r}: schedule must be seconds, a timedelta, a crontab "
                         f"or a datetime, got {schedule!r}")
    if isinstance(schedule, (int, float)):
        return {"every": _seconds(name, float(schedule))}
    if isinstance(schedule, timedelta):
        return {"every": _seconds(name, schedule.total_seconds())}
    if isinstance(schedule, datetime):
        when = schedule if schedule.tzinfo is not None else schedule.replace(tzinfo=tz)
        return {"at": when}
    if isinstance(schedule, crontab) and type(schedule) is crontab:
        expr = crontab_expression(schedule)
        fields = expr.split()
        if fields[2] != "*" and fields[4] != "*":
            # Celery runs on days matching both day fields, a cron job on either: keep
            # Celery's rule as a schedule type of this package
            return {"custom": {"type": CRONTAB_TYPE, "data": crontab_data(schedule, tz)}}
        return {"cron": expr, "timezone": tz.key}
    if type(schedule) is interval and not getattr(schedule, "relative", False):
        every: timedelta = schedule.run_every  # type: ignore[attr-defined]
        return {"every": _seconds(name, every.total_seconds())}
    if type(schedule) is interval:
        raise EntryError(f"entry {name!r}: relative=True intervals cannot be stored (a "
                         "dynamic entry runs every interval on the UTC grid); give the "
                         "interval without relative=True")
    if isinstance(schedule, solar) and type(schedule) is solar:
        try:
            CelerySolarSchedule.from_solar(schedule)
        except (TypeError, ValueError) as exc:
            raise EntryError(f"entry {name!r}: {exc}") from None
        return {"custom": {"type": SOLAR_TYPE, "data": solar_data(schedule)}}
    raise EntryError(
        f"entry {name!r}: a {type(schedule).__name__} schedule cannot be stored as a dynamic "
        "entry (its own is_due decides, which is code, not data); put it in beat_schedule, "
        "which runs it on the shared last_run_at, or register an anarchon schedule type "
        "(anarchon.register_schedule_type) and save the entry with that schedule")


def _seconds(name: str, seconds: float) -> float:
    if not math.isfinite(seconds) or seconds <= 0:
        raise EntryError(f"entry {name!r}: interval must be a positive number of seconds, "
                         f"got {seconds!r}")
    return seconds


def celery_schedule(spec: ScheduleSpec, app: Any = None) -> Any:
    """The Celery schedule object a stored schedule reads back as, bound to ``app``: a
    ``schedule`` (every), a ``crontab`` carrying its own zone (``tz``: the stored
    timezone, so ``remaining_estimate``/``is_due`` count on the wall clock the entry runs
    on), a ``solar``, or an aware ``datetime`` (one run at it); another custom type, or a
    cron expression with seconds, as its text."""
    from celery.schedules import schedule, solar

    if spec.kind == "every":
        return schedule(timedelta(seconds=float(spec.when)), app=app)
    if spec.kind == "custom":
        kind, data = spec.when["type"], spec.when["data"]
        if kind == SOLAR_TYPE:
            return solar(data["event"], data["lat"], data["lon"], app=app)
        if kind == CRONTAB_TYPE:
            return zoned_crontab(str(data["expr"]), str(data["timezone"]), app)
        return spec.describe()
    if spec.kind == "cron":
        if len(str(spec.when).split()) == 6:  # seconds first: not Celery's; shown as stored
            return str(spec.when)
        return zoned_crontab(str(spec.when), spec.timezone, app)
    return datetime.fromisoformat(str(spec.when))


def schedule_of_job(schedule: Schedule, app: Any = None) -> Any:
    """The Celery schedule a job's core schedule (``AsyncScheduler.job_schedule()``) reads
    as, bound to ``app``, as :func:`celery_schedule` reads a stored one: what a stored
    entry's publish gives beat's ``apply_entry`` (Sentry Crons reads its ``schedule``)."""
    from celery.schedules import schedule as interval
    from celery.schedules import solar

    if isinstance(schedule, EverySchedule):
        return interval(timedelta(milliseconds=schedule.interval_ms), app=app)
    if isinstance(schedule, CelerySolarSchedule):
        return solar(schedule.event, schedule.lat, schedule.lon,  # type: ignore[arg-type]
                     app=app)  # an event CelerySolarSchedule checked
    if isinstance(schedule, (CronSchedule, CeleryCrontabSchedule)) \
            and len(schedule.expr.split()) == 5:
        return zoned_crontab(schedule.expr, schedule.tz.key, app)
    if isinstance(schedule, AtSchedule):
        return ms_to_datetime(schedule.slot_ms)
    return schedule.describe()


def zoned_crontab(expr: str, zone: str, app: Any = None) -> Any:
    """A plain ``celery.schedules.crontab`` for the 5-field ``expr`` evaluated in ``zone``
    (Celery reads a crontab's zone from its ``tz``, by default the app's timezone)."""
    from celery.schedules import crontab

    made = crontab(**dict(zip(_CRON_FIELDS, expr.split(), strict=True)), app=app)
    vars(made)["tz"] = ZoneInfo(zone)  # what setting its cached "tz" stores
    return made


def crontab_zone(schedule: Any, app_zone: ZoneInfo) -> str | None:
    """The zone a crontab carries itself (its ``tz`` set, as ``Entry.load()`` and
    django-celery-beat's crontabs do) when it is not the app's; else ``None``."""
    own = vars(schedule).get("tz")
    if own is None:
        return None
    key = getattr(own, "key", None) or str(own)
    return None if key == app_zone.key else str(key)


@dataclass(frozen=True)
class Params:
    """What a dynamic entry stores for its handler: the task and how to publish it."""

    task: str
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] | None = None
    options: Mapping[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return {"task": self.task, "args": list(self.args), "kwargs": dict(self.kwargs or {}),
                "options": dict(self.options or {})}

    @classmethod
    def from_json(cls, data: Any) -> Params:
        """Read stored params; ``EntryError`` when they are not an entry's."""
        if not isinstance(data, Mapping) or not isinstance(data.get("task"), str):
            raise EntryError(f"not the params of a Celery entry: {data!r}")
        return cls(data["task"], tuple(data.get("args") or ()), dict(data.get("kwargs") or {}),
                   dict(data.get("options") or {}))


def check_serializable(name: str, params: Params, app: Any) -> None:
    """Refuse args/kwargs/options the app's serializer (and the store's JSON) cannot
    carry, naming the entry and the serializer."""
    from kombu.serialization import dumps

    serializer = str(app.conf.task_serializer or "json")
    for what, value in (("args", list(params.args)), ("kwargs", dict(params.kwargs or {})),
                        ("options", dict(params.options or {}))):
        try:
            dumps(value, serializer=serializer)
        except Exception as exc:  # kombu wraps every encoder's error differently
            raise EntryError(f"entry {name!r}: {what} cannot be serialised with the app's "
                             f"task_serializer {serializer!r}: {exc}") from None
        try:
            json.dumps(value, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise EntryError(f"entry {name!r}: {what} must be JSON to be stored with the "
                             f"entry: {exc}") from None


class _ParamsEntry:
    """The ``ScheduleEntry`` fields a publish reads, from one run's params and the
    schedule the job runs on here."""

    def __init__(self, name: str, params: Params, schedule: Any) -> None:
        self.name = name
        self.task = params.task
        self.args = list(params.args)
        self.kwargs = dict(params.kwargs or {})
        self.schedule = schedule


class EntryPublisher:
    """The ``celery:publish`` handler: publishes the task in the run's params, with the
    same lease fence, retries and headers as a ``beat_schedule`` entry's publish."""

    def __init__(self, app: Any, engine: AsyncScheduler, *, track: bool, queue_lease: float,
                 max_late: float, watch: OutcomeWatch | None = None,
                 values: Values | None = None, beat: Any = None) -> None:
        self.app = app
        self.values = values
        self.beat = beat
        self.watch = watch
        self.engine = engine
        self.track = track
        self.queue_lease = queue_lease
        self.max_late = max_late

    def __call__(self, ctx: RunContext) -> None:
        try:
            params = Params.from_json(ctx.params)
        except EntryError as exc:
            raise ConfigurationError(f"dynamic job {ctx.name!r}: {exc}") from None
        options = dict(params.options or {})
        own = options.pop("anarchon", None) or {}
        max_late = self.max_late
        if isinstance(own, Mapping) and own.get("max_late") is not None:
            max_late = parse_duration(own["max_late"], option=f"entry {ctx.name!r}: max_late")
        try:  # from memory: the definition this beat applied, no store call
            schedule = schedule_of_job(self.engine.job_schedule(ctx.name), self.app)
        except JobNotFoundError:  # removed while its run started
            schedule = None
        publisher = Publisher(self.app, _ParamsEntry(ctx.name, params, schedule), options,
                              track=self.track, queue_lease=self.queue_lease,
                              max_late=max_late, engine=self.engine,
                              lease=self.engine.options.lease,
                              heartbeat=self.engine.options.heartbeat,
                              values=self.values, beat=self.beat, watch=self.watch)
        publisher(ctx)


__all__ = ["HANDLER", "EntryError", "EntryPublisher", "Params", "celery_schedule",
           "check_serializable", "crontab_zone", "schedule_arguments", "schedule_of_job",
           "zoned_crontab"]
