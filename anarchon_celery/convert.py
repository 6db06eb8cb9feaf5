"""beat_schedule entries -> anarchon jobs, refusing what beats cannot compute alike."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timezone
from typing import Any
from zoneinfo import ZoneInfo

from anarchon import parse_duration
from anarchon.slots import Schedule

from .config import ConfigurationError
from .crontab import CeleryCrontabSchedule

#: per-entry options of this package, taken out of ``options["anarchon"]``
PACKAGE_OPTIONS = ("queue_lease", "track_outcomes")


@dataclass(frozen=True)
class JobPlan:
    """One beat entry as an anarchon job."""

    name: str
    #: ``"every"`` (``when`` = seconds) or ``"cron"`` (``when`` = expression)
    kind: str
    when: Any
    #: replaces the core's schedule (Celery's crontab rules), or ``None``
    schedule: Schedule | None
    #: core job options (``max_attempts``, ``catch_up``, ``timezone`` …)
    options: Mapping[str, Any]
    #: this package's options for the entry (``queue_lease``, ``track_outcomes``)
    extra: Mapping[str, Any]
    #: the entry's publish options without the ``anarchon`` key
    publish_options: Mapping[str, Any]


def app_timezone(app: Any) -> ZoneInfo:
    """The app's timezone as an IANA zone; local time is refused (it differs per node)."""
    tz = app.timezone
    if isinstance(tz, ZoneInfo):
        return tz
    if tz is timezone.utc:
        return ZoneInfo("UTC")
    try:
        return ZoneInfo(str(getattr(tz, "key", None) or tz))
    except Exception as exc:
        raise ConfigurationError(
            f"the app's timezone {tz!r} is not an IANA zone; set app.conf.timezone (e.g. "
            "'Europe/Berlin'): every beat must compute crontab slots on the same clock"
        ) from exc


def convert_entry(name: str, entry: Any, tz: ZoneInfo) -> JobPlan:
    """Turn one ``ScheduleEntry`` into a [`JobPlan`][anarchon_celery.convert.JobPlan] or raise
    naming the entry."""
    from celery.schedules import crontab, schedule, solar

    options = dict(entry.options or {})
    raw = options.pop("anarchon", None) or {}
    if not isinstance(raw, Mapping):
        raise ConfigurationError(f"beat entry {name!r}: options['anarchon'] must be a dict, "
                                 f"got {type(raw).__name__}")
    job_options = {k: v for k, v in raw.items() if k not in PACKAGE_OPTIONS}
    extra = {k: v for k, v in raw.items() if k in PACKAGE_OPTIONS}
    if "queue_lease" in extra:
        extra["queue_lease"] = parse_duration(extra["queue_lease"],
                                              option=f"beat entry {name!r}: queue_lease")
    sched = entry.schedule
    if isinstance(sched, crontab):
        job_options.setdefault("timezone", tz.key)
        zone = ZoneInfo(job_options["timezone"]) if job_options["timezone"] != tz.key else tz
        cron = CeleryCrontabSchedule.from_crontab(sched, zone)
        return JobPlan(name, "cron", cron.expr, cron, job_options, extra, options)
    if isinstance(sched, solar):
        raise ConfigurationError(
            f"beat entry {name!r}: solar schedules are not supported by anarchon_celery yet "
            "(they need a deterministic schedule hook in anarchon); use a crontab")
    if type(sched) is schedule:
        run_every = sched.run_every  # type: ignore[attr-defined]
        seconds = float(run_every.total_seconds())
        if seconds <= 0:
            raise ConfigurationError(f"beat entry {name!r}: interval must be positive, got "
                                     f"{run_every!r}")
        return JobPlan(name, "every", seconds, None, job_options, extra, options)
    raise ConfigurationError(
        f"beat entry {name!r}: schedule {sched!r} ({type(sched).__name__}) cannot be computed "
        "identically on every beat; use seconds, a timedelta or a crontab")


__all__ = ["JobPlan", "PACKAGE_OPTIONS", "app_timezone", "convert_entry"]
