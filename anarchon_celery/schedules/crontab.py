"""Celery ``crontab`` entries as anarchon schedules: pure, identical on every beat.

Celery differs from cron (and from anarchon's own
[`anarchon.schedules.kinds.CronSchedule`][anarchon.schedules.kinds.CronSchedule])
in two ways that this schedule reproduces:

* a day must match day-of-month **and** day-of-week (cron ORs them);
* wall-clock arithmetic keeps the first occurrence of a repeated hour: in the repeated
  hour of a DST change only the first occurrence runs, even for ``*`` or stepped hours,
  and a time in the gap runs at the shifted instant (02:30 -> 03:30).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from typing import Any
from zoneinfo import ZoneInfo

from croniter import croniter

from anarchon.schedules.custom import register_schedule_type
from anarchon.schedules.kinds import Schedule, datetime_to_ms, load_timezone, ms_to_datetime

UTC = timezone.utc
_FIELDS = (  # attribute, original attribute, lowest, highest
    ("minute", "_orig_minute", 0, 59),
    ("hour", "_orig_hour", 0, 23),
    ("day_of_month", "_orig_day_of_month", 1, 31),
    ("month_of_year", "_orig_month_of_year", 1, 12),
    ("day_of_week", "_orig_day_of_week", 0, 6),
)
_MAX_STEPS = 10_000


def _field_text(values: Iterable[int], low: int, high: int) -> str:
    numbers = sorted(set(values))
    if numbers == list(range(low, high + 1)):
        return "*"
    return ",".join(str(n) for n in numbers)


def _original_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, int):
        return str(value)
    return ",".join(str(v) for v in sorted(value))


def crontab_expression(schedule: Any) -> str:
    """A 5-field cron expression (minute hour day month weekday) for a Celery crontab.

    Built from the crontab's expanded field sets, which Celery derives from the original
    constructor fields (``_orig_*``); never from its repr (whose field order differs).
    """
    return " ".join(_field_text(getattr(schedule, attr), low, high)
                    for attr, _, low, high in _FIELDS)


def crontab_original(schedule: Any) -> str:
    """The crontab's original fields in cron order, for display (``'0 4 * * mon-fri'``)."""
    return " ".join(_original_text(getattr(schedule, orig)) for _, orig, _, _ in _FIELDS)


class CeleryCrontabSchedule(Schedule):
    """A Celery crontab on ``tz``'s wall clock, with Celery's rules (see module doc)."""

    kind = "cron"

    def __init__(self, expr: str, tz: ZoneInfo, original: str | None = None) -> None:
        self.expr = expr
        self.tz = tz
        self.original = original or expr
        try:
            croniter(expr, datetime(2000, 1, 1), day_or=False).get_next(datetime)
        except Exception as exc:  # croniter raises several types for bad input
            raise ValueError(f"invalid crontab {self.original!r}: {exc}") from exc

    @classmethod
    def from_crontab(cls, schedule: Any, tz: ZoneInfo) -> CeleryCrontabSchedule:
        """Build from a ``celery.schedules.crontab`` evaluated in ``tz``."""
        return cls(crontab_expression(schedule), tz, crontab_original(schedule))

    def _wall(self, ms: int) -> datetime:
        local = ms_to_datetime(ms).astimezone(self.tz)
        if local.fold == 1 and local.replace(fold=0).utcoffset() != local.utcoffset():
            # In the second occurrence of a repeated hour, continue from the first one:
            # its slots were those of the first occurrence, Celery never runs them twice.
            local = local.replace(fold=0)
        return local.replace(tzinfo=None)

    def next_after(self, after_ms: int) -> int | None:
        wall = self._wall(after_ms)
        iterator = croniter(self.expr, wall, day_or=False)
        for _ in range(_MAX_STEPS):
            try:
                candidate: datetime = iterator.get_next(datetime)
            except Exception:  # croniter gives up on expressions that never match again
                return None
            # fold=0: the first occurrence of a repeated time; a time in a gap maps to the
            # instant after it (the offset before the change), as Celery's arithmetic does.
            slot = datetime_to_ms(candidate.replace(tzinfo=self.tz, fold=0))
            if slot > after_ms:
                return slot
        return None

    def describe(self) -> str:
        return f"crontab '{self.original}' ({self.tz.key}; day-of-month AND day-of-week)"

    def __repr__(self) -> str:
        return f"CeleryCrontabSchedule({self.expr!r}, {self.tz.key!r})"


def celery_next_run(schedule: Any, after: datetime) -> datetime:
    """Celery's own next run after ``after`` (aware), computed by Celery's crontab code.

    Used by tests and for checking: ``after`` plays beat's ``last_run_at``. It is given
    in the schedule's zone: Celery up to 5.6 evaluates a crontab in the zone of the
    ``last_run_at`` it is passed (5.7 converts it first).
    """
    last, delta, _ = schedule.remaining_delta(after.astimezone(schedule.tz), tz=schedule.tz)
    result: datetime = (last + delta).astimezone(UTC)
    return result


#: the schedule type dynamic entries store crontabs with both day fields as (data:
#: expr, original, timezone): a stored cron job would OR the days, Celery ANDs them
CRONTAB_TYPE = "celery.crontab"


def crontab_data(schedule: Any, tz: ZoneInfo) -> dict[str, Any]:
    """A ``celery.schedules.crontab`` in ``tz`` as stored schedule data."""
    return {"expr": crontab_expression(schedule), "original": crontab_original(schedule),
            "timezone": tz.key}


def crontab_from_data(data: Mapping[str, Any]) -> CeleryCrontabSchedule:
    """The slots of stored crontab data, with Celery's rules."""
    return CeleryCrontabSchedule(str(data["expr"]), load_timezone(str(data["timezone"])),
                                 str(data.get("original") or data["expr"]))


register_schedule_type(CRONTAB_TYPE, crontab_from_data)


__all__ = ["CRONTAB_TYPE", "CeleryCrontabSchedule", "celery_next_run", "crontab_data",
           "crontab_expression", "crontab_from_data", "crontab_original"]
