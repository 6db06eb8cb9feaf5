"""Read django-celery-beat's ``PeriodicTask`` rows as
[`Source`][anarchon_celery.importers.plan.Source]s (``manage.py anarchon import-celery-beat``).

Each row has one schedule: ``IntervalSchedule`` (every), ``CrontabSchedule`` (cron in the
row's own timezone), ``ClockedSchedule`` (once at), ``SolarSchedule`` (solar, the same
event and place). ``one_off`` rows that have not run become one run at
their next due time; ``start_time`` in the future is refused (entries have no start
time); ``args``/``kwargs``/``headers`` are JSON text; ``queue``, ``exchange``,
``routing_key``, ``priority``, ``headers``, ``expire_seconds`` and ``expires`` become
publish options. Only reads are made, except ``disable_source`` after applying.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from typing import Any, TextIO

from anarchon_celery.entries.entry import Entry
from anarchon_celery.importers.plan import Row, Source, apply, describe_schedule, plan, print_table
from anarchon_celery.schedules.crontab import CeleryCrontabSchedule

UTC = timezone.utc


def _zone_name(value: Any) -> str:
    return str(getattr(value, "key", None) or getattr(value, "zone", None) or value or "UTC")


def _json(text: Any, what: str, default: Any) -> Any:
    if text in (None, ""):
        return default
    try:
        return json.loads(text)
    except ValueError as exc:
        raise ValueError(f"{what} is not JSON: {exc}") from None


def _old_text(task: Any, schedule: str) -> str:
    last = task.last_run_at.isoformat() if task.last_run_at else "never"
    text = f"{schedule}, last run {last}, ran {task.total_run_count or 0}x"
    if task.one_off:
        text += ", one_off"
    if not task.enabled:
        text += ", disabled"
    return text


def _schedule(task: Any) -> tuple[Any, str, dict[str, Any]]:
    """(Celery schedule or None, its old text, anarchon job options) or ValueError."""
    from celery.schedules import crontab, solar

    if task.interval is not None:
        interval = task.interval
        if interval.period == "microseconds":
            delta = timedelta(microseconds=interval.every)
        else:
            delta = timedelta(**{interval.period: interval.every})
        return delta, f"every {interval.every} {interval.period}", {}
    if task.crontab is not None:
        row = task.crontab
        zone = _zone_name(row.timezone)
        sched = crontab(minute=row.minute, hour=row.hour, day_of_week=row.day_of_week,
                        day_of_month=row.day_of_month, month_of_year=row.month_of_year)
        return sched, f"{describe_schedule(sched)} ({zone})", {"timezone": zone}
    if task.clocked is not None:
        when = task.clocked.clocked_time
        return when, f"clocked {when.isoformat()}", {}
    if task.solar is not None:
        row = task.solar
        sun = solar(row.event, float(row.latitude), float(row.longitude))
        return sun, describe_schedule(sun), {}
    raise ValueError("the row has no schedule")


def _next_due(schedule: Any, zone: str | None, after: datetime) -> datetime:
    """The next due time of ``schedule`` after ``after`` (for a one_off row)."""
    from zoneinfo import ZoneInfo

    if isinstance(schedule, timedelta):
        return after + schedule
    cron = CeleryCrontabSchedule.from_crontab(schedule, ZoneInfo(zone or "UTC"))
    slot = cron.next_after(int(after.timestamp() * 1000))
    if slot is None:
        raise ValueError("its crontab never matches again")
    return datetime.fromtimestamp(slot / 1000, UTC)


def _options(task: Any, now: datetime) -> dict[str, Any]:
    options: dict[str, Any] = {}
    for field in ("queue", "exchange", "routing_key"):
        value = getattr(task, field, None)
        if value:
            options[field] = value
    if task.priority is not None:
        options["priority"] = task.priority
    headers = _json(getattr(task, "headers", None), "headers", {})
    if headers:
        options["headers"] = headers
    if task.expire_seconds is not None:
        options["expires"] = task.expire_seconds
    elif task.expires is not None:
        if task.expires <= now:
            raise ValueError(f"it expired at {task.expires.isoformat()}")
        options["expires"] = task.expires.astimezone(UTC).isoformat()
    return options


def source_of(app: Any, task: Any, now: datetime) -> Source:
    """One ``PeriodicTask`` row as a source entry (or why it cannot be carried over)."""
    try:
        schedule, old, anarchon = _schedule(task)
    except ValueError as exc:
        solar = task.solar
        shown = (f"solar {solar.event} ({solar.latitude}, {solar.longitude})"
                 if solar is not None else "no schedule")
        return Source(task.name, _old_text(task, shown), reason=str(exc))
    old = _old_text(task, old)
    note, any_instant = "", False
    try:
        args = _json(task.args, "args", [])
        kwargs = _json(task.kwargs, "kwargs", {})
        options = _options(task, now)
        if task.start_time is not None and task.start_time > now and not task.one_off:
            raise ValueError(f"start_time {task.start_time.isoformat()} is in the future: "
                             "entries have no start time; import it after then")
        if task.clocked is not None or task.one_off:
            if task.total_run_count or (task.last_run_at is not None and task.one_off):
                raise ValueError("a one-off that has run already")
            if task.clocked is None:
                base = max(now, task.start_time or now)
                schedule = _next_due(schedule, anarchon.get("timezone"), base)
                anarchon, note = {}, "one_off: its next due time only"
                any_instant = True
            elif schedule <= now:
                raise ValueError(f"its clocked time {schedule.isoformat()} has passed")
    except ValueError as exc:
        return Source(task.name, old, reason=str(exc))
    if anarchon:
        options["anarchon"] = anarchon
    entry = Entry(app, task.name, task.task, schedule, args, kwargs, options,
                  enabled=bool(task.enabled))
    return Source(task.name, old, entry, note=note, any_instant=any_instant)


def read_sources(app: Any) -> list[Source]:
    """Every ``PeriodicTask`` row, by name."""
    from django_celery_beat.models import PeriodicTask

    now = datetime.now(UTC)
    rows = PeriodicTask.objects.select_related("interval", "crontab", "solar", "clocked")
    return [source_of(app, task, now) for task in rows.order_by("name")]


def disable_sources(rows: Sequence[Row]) -> int:
    """Disable the ``PeriodicTask`` rows now carried by stored entries (django-celery-beat
    then stops running them); returns how many were changed."""
    from django_celery_beat.models import PeriodicTask

    names = [r.source.name for r in rows if r.action in ("add", "update", "same")]
    changed = 0
    for task in PeriodicTask.objects.filter(name__in=names, enabled=True):
        task.enabled = False
        task.save()  # save(), not update(): it bumps django-celery-beat's change marker
        changed += 1
    return changed


def import_celery_beat(app: Any, *, write: bool, disable_source: bool, out: TextIO) -> int:
    """Plan (with ``write``: apply) the rows; prints the table; returns the exit status."""
    if disable_source and not write:
        raise ValueError("--disable-source goes with --apply (a dry run changes nothing)")
    rows = plan(app, read_sources(app))
    if write:
        apply(rows)
    print_table(rows, out, applied=write)
    if disable_source:
        count = disable_sources(rows)
        out.write(f"disabled {count} django-celery-beat task(s) now run by anarchon\n")
    return 0


def add_parser(subparsers: Any) -> Any:
    """The ``import-celery-beat`` subcommand of ``manage.py anarchon``."""
    parser = subparsers.add_parser(
        "import-celery-beat", help="carry django-celery-beat's periodic tasks over to stored "
        "anarchon entries (dry run unless --apply)")
    parser.add_argument("--apply", action="store_true",
                        help="write the entries (default: dry run, nothing written)")
    parser.add_argument("--disable-source", action="store_true",
                        help="with --apply: disable the PeriodicTask rows carried over")
    parser.add_argument("--app", default=None, help="the Celery app as for celery -A "
                        "(default: the current app, e.g. proj/celery.py's)")
    return parser


def run_command(out: Any, **options: Any) -> None:
    """``manage.py anarchon import-celery-beat``: what the management command calls
    with its parsed options (``apply``, ``disable_source``, ``app``)."""
    from celery import current_app
    from django.core.management.base import CommandError

    from anarchon_celery.__main__ import load_app

    try:
        celery_app = load_app(options["app"]) if options.get("app") else current_app
        import_celery_beat(celery_app, write=bool(options.get("apply")),
                           disable_source=bool(options.get("disable_source")), out=out)
    except (ValueError, LookupError, RuntimeError) as exc:
        raise CommandError(f"import-celery-beat: {exc}") from exc


__all__ = ["add_parser", "disable_sources", "import_celery_beat", "read_sources",
           "run_command", "source_of"]
