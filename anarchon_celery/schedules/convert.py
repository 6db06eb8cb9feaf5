"""beat_schedule entries -> anarchon jobs, refusing what beats cannot compute alike."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timezone
from typing import Any
from zoneinfo import ZoneInfo

from anarchon import parse_duration
from anarchon.handoff.options import RENAMED, canonical_options
from anarchon.schedules.kinds import Schedule, load_timezone
from anarchon_celery.beat.config import ConfigurationError
from anarchon_celery.schedules.crontab import CeleryCrontabSchedule
from anarchon_celery.schedules.solar import CelerySolarSchedule

#: per-entry options of this package, taken out of ``options["anarchon"]``
#: (``track_outcomes`` and ``republish``: deprecated names of ``track`` and ``resend``)
PACKAGE_OPTIONS = ("queue_lease", "track", "resend", *RENAMED)


@dataclass(frozen=True)
class JobPlan:
    """One beat entry as an anarchon job."""

    name: str
    #: ``"every"`` (``when`` = seconds), ``"cron"`` (``when`` = expression) or
    #: ``"solar"`` (``when`` = its description) or ``"shared"`` (``when`` = the Celery
    #: schedule, run through its own ``is_due``: see ``anarchon_celery.beat.shared``)
    kind: str
    when: Any
    #: replaces the core's schedule (Celery's crontab rules), or ``None``
    schedule: Schedule | None
    #: core job options (``max_attempts``, ``catch_up``, ``timezone`` …)
    options: Mapping[str, Any]
    #: this package's options for the entry (``queue_lease``, ``track``, ``resend``)
    extra: Mapping[str, Any]
    #: the entry's publish options without the ``anarchon`` key
    publish_options: Mapping[str, Any]


def app_timezone(app: Any) -> ZoneInfo:
    """The app's timezone as an IANA zone; the host's local zone is refused (it differs
    per node, so each beat would put a crontab's slots at another instant)."""
    conf = app.conf
    if not conf.get("timezone") and not conf.get("enable_utc", True):
        raise ConfigurationError(
            "enable_utc=False and no timezone set: Celery then evaluates crontabs in each "
            "host's local zone, so beats on hosts in different zones would publish one "
            "slot at different instants; set app.conf.timezone to an IANA zone (e.g. "
            "timezone='Europe/Berlin') or enable_utc=True")
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


def _overrides(sched: Any, base: type, names: tuple[str, ...]) -> bool:
    """Whether ``sched``'s class replaces any of ``base``'s methods ``names``."""
    return any(getattr(type(sched), n, None) is not getattr(base, n, None) for n in names)


def path_of(sched: Any, relative: bool = False) -> str:
    """How an entry's schedule runs: ``"every"``, ``"cron"`` or ``"solar"`` (slots every
    beat computes alike) or ``"shared"`` (the schedule's own ``is_due`` on the shared
    ``last_run_at``)."""
    from celery.schedules import crontab, schedule, solar

    timing = ("is_due", "remaining_estimate", "remaining_delta")
    if isinstance(sched, crontab) and not _overrides(sched, crontab, timing):
        return "cron"
    if isinstance(sched, solar) and not _overrides(sched, solar, timing):
        return "solar"
    if (type(sched) is schedule and not relative
            and not getattr(sched, "relative", False)):
        return "every"
    return "shared"


def convert_entry(name: str, entry: Any, tz: ZoneInfo,
                  default_zone: str | None = None) -> JobPlan:
    """Turn one ``ScheduleEntry`` into a
    [`JobPlan`][anarchon_celery.schedules.convert.JobPlan] or raise naming the entry.

    A crontab's zone is the entry's ``options["anarchon"]["timezone"]``, else
    ``default_zone`` (``anarchon_scheduler["timezone"]``), else the app's ``tz``.
    """
    options = dict(entry.options or {})
    raw = options.pop("anarchon", None) or {}
    if not isinstance(raw, Mapping):
        raise ConfigurationError(f"beat entry {name!r}: options['anarchon'] must be a dict, "
                                 f"got {type(raw).__name__}")
    try:
        raw = canonical_options(raw, f"beat entry {name!r}: options['anarchon']")
    except ValueError as exc:
        raise ConfigurationError(str(exc)) from None
    job_options = {k: v for k, v in raw.items() if k not in PACKAGE_OPTIONS}
    extra = {k: v for k, v in raw.items() if k in PACKAGE_OPTIONS}
    if "queue_lease" in extra:
        extra["queue_lease"] = parse_duration(extra["queue_lease"],
                                              option=f"beat entry {name!r}: queue_lease")
    sched = entry.schedule
    path = path_of(sched, bool(getattr(entry, "relative", False)))
    if path == "cron":
        zone_name = job_options.setdefault("timezone", default_zone or tz.key)
        try:
            zone = tz if zone_name == tz.key else load_timezone(zone_name, job=name)
        except (TypeError, ValueError) as exc:
            raise ConfigurationError(f"beat entry {name!r}: {exc}") from None
        job_options["timezone"] = zone.key
        cron = CeleryCrontabSchedule.from_crontab(sched, zone)
        return JobPlan(name, "cron", cron.expr, cron, job_options, extra, options)
    if "timezone" in job_options:
        raise ConfigurationError(f"beat entry {name!r}: options['anarchon']['timezone'] only "
                                 f"applies to crontab entries, not to a {type(sched).__name__}")
    if path == "solar":
        solar_schedule = CelerySolarSchedule.from_solar(sched)
        return JobPlan(name, "solar", solar_schedule.describe(), solar_schedule, job_options,
                       extra, options)
    if path == "every":
        run_every = sched.run_every
        seconds = float(run_every.total_seconds())
        if seconds <= 0:
            raise ConfigurationError(f"beat entry {name!r}: interval must be positive, got "
                                     f"{run_every!r}")
        return JobPlan(name, "every", seconds, None, job_options, extra, options)
    if job_options:
        raise ConfigurationError(
            f"beat entry {name!r}: its {type(sched).__name__} schedule decides by its own "
            "is_due on the shared last_run_at, where anarchon job options "
            f"{sorted(job_options)} do not apply")
    return JobPlan(name, "shared", sched, None, job_options, extra, options)


__all__ = ["JobPlan", "PACKAGE_OPTIONS", "app_timezone", "convert_entry", "path_of"]
