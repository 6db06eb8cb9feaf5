"""Dynamic entries as core dynamic jobs: their schedule, their params, their handler.

Every anarchon beat offers one handler, [`HANDLER`][anarchon_celery.dynamic.HANDLER]
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
from anarchon.control import ScheduleSpec

from .config import ConfigurationError
from .crontab import crontab_expression, crontab_original
from .outcomes import OutcomeWatch
from .publish import Publisher

#: the handler name every anarchon beat offers for dynamic entries
HANDLER = "celery:publish"
_CRON_FIELDS = ("minute", "hour", "day_of_month", "month_of_year", "day_of_week")


class EntryError(ValueError):
    """A dynamic entry that cannot be stored as given (the message says what and why)."""


def schedule_arguments(name: str, schedule: Any, tz: ZoneInfo) -> dict[str, Any]:
    """``add_job()``'s schedule arguments for a Celery schedule, or ``EntryError``.

    Numbers, ``timedelta`` and a plain ``celery.schedules.schedule`` run ``every`` (on the
    UTC grid); ``crontab`` runs ``cron`` in its zone ``tz``; an aware or naive (read in
    ``tz``) ``datetime`` runs once ``at`` it. ``solar`` and custom schedules are refused:
    the core's dynamic jobs store every/cron/at only.
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
            raise EntryError(
                f"entry {name!r}: crontab {crontab_original(schedule)!r} restricts both "
                "day_of_month and day_of_week; Celery runs on days matching both, a stored "
                "cron job on days matching either, so it is refused (put it in "
                "beat_schedule, where beats keep Celery's rule, or give only one of them)")
        return {"cron": expr, "timezone": tz.key}
    if type(schedule) is interval and not getattr(schedule, "relative", False):
        every: timedelta = schedule.run_every  # type: ignore[attr-defined]
        return {"every": _seconds(name, every.total_seconds())}
    if type(schedule) is interval:
        raise EntryError(f"entry {name!r}: relative=True intervals cannot be stored (a "
                         "dynamic entry runs every interval on the UTC grid); give the "
                         "interval without relative=True")
    if isinstance(schedule, solar):
        raise EntryError(
            f"entry {name!r}: solar schedules cannot be stored as dynamic entries (dynamic "
            "jobs keep every/cron/at schedules only); put it in beat_schedule, where every "
            "beat computes Celery's solar times")
    raise EntryError(
        f"entry {name!r}: a {type(schedule).__name__} schedule cannot be stored as a dynamic "
        "entry (dynamic jobs keep every/cron/at only; custom schedules decide by their own "
        "is_due); put it in beat_schedule, which runs it on the shared last_run_at")


def _seconds(name: str, seconds: float) -> float:
    if not math.isfinite(seconds) or seconds <= 0:
        raise EntryError(f"entry {name!r}: interval must be a positive number of seconds, "
                         f"got {seconds!r}")
    return seconds


def celery_schedule(spec: ScheduleSpec) -> Any:
    """The Celery schedule a stored schedule reads back as (``timedelta``, ``crontab``
    or an aware ``datetime``)."""
    from celery.schedules import crontab

    if spec.kind == "every":
        return timedelta(seconds=float(spec.when))
    if spec.kind == "cron":
        fields = str(spec.when).split()
        if len(fields) == 6:  # seconds first: not Celery's; shown as stored
            return str(spec.when)
        return crontab(**dict(zip(_CRON_FIELDS, fields, strict=True)))
    return datetime.fromisoformat(str(spec.when))


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
    """The ``ScheduleEntry`` fields ``send_entry`` reads, from one run's params."""

    def __init__(self, name: str, params: Params) -> None:
        self.name = name
        self.task = params.task
        self.args = list(params.args)
        self.kwargs = dict(params.kwargs or {})


class EntryPublisher:
    """The ``celery:publish`` handler: publishes the task in the run's params, with the
    same lease fence, retries and headers as a ``beat_schedule`` entry's publish."""

    def __init__(self, app: Any, engine: AsyncScheduler, *, track: bool, queue_lease: float,
                 max_late: float, watch: OutcomeWatch | None = None) -> None:
        self.app = app
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
        publisher = Publisher(self.app, _ParamsEntry(ctx.name, params), options,
                              track=self.track, queue_lease=self.queue_lease,
                              max_late=max_late, engine=self.engine,
                              lease=self.engine.options.lease,
                              heartbeat=self.engine.options.heartbeat)
        publisher.watch = self.watch
        publisher(ctx)


__all__ = ["HANDLER", "EntryError", "EntryPublisher", "Params", "celery_schedule",
           "check_serializable", "schedule_arguments"]
