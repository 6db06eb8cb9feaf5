"""When an [`Entry`][anarchon_celery.Entry] runs, by the definition the beats run: its
slots (the stored schedule's for a stored entry, the ``beat_schedule`` conversion's for a
code entry), not the Celery schedule object's own maths (an interval there counts from
``last_run_at``; the beats run it on the UTC grid). A ``beat_schedule`` entry on the
shared ``last_run_at`` path decides by its own ``is_due``: so does this.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone
from typing import Any

from anarchon.control.changes import ScheduleSpec
from anarchon.jobs.definition import resolve_job
from anarchon.schedules.kinds import Schedule, ms_to_datetime
from anarchon_celery.beat.config import resolve
from anarchon_celery.schedules.convert import app_timezone, convert_entry

UTC = timezone.utc


class _CodeView:
    """The ``ScheduleEntry`` fields ``convert_entry`` reads, from a read-only Entry."""

    def __init__(self, entry: Any) -> None:
        self.schedule = entry.schedule
        self.options = entry.options
        self.relative = False


def slots_of(entry: Any) -> Schedule | None:
    """The slot schedule the beats run ``entry`` on; ``None`` for a ``beat_schedule``
    entry whose own ``is_due`` decides (the shared path)."""
    if entry.read_only:
        zone = resolve(entry.app).scheduler_options.get("timezone")
        plan = convert_entry(entry.name, _CodeView(entry), app_timezone(entry.app), zone)
        if plan.kind == "shared":
            return None
        if plan.schedule is not None:
            return plan.schedule
        return resolve_job("every", entry.name, plan.when, {}).schedule
    spec = ScheduleSpec.choose(job=entry.name, **entry.schedule_arguments(
        dict(entry.options or {}).get("anarchon", {}).get("timezone")))
    return resolve_job(spec.kind, entry.name, spec.when, spec.options()).schedule


def _aware(value: datetime | None, default: datetime) -> datetime:
    if value is None:
        return default
    if value.tzinfo is None:
        raise ValueError(f"last_run_at must be an aware datetime, got naive {value!r}")
    return value


def next_run(entry: Any, after: datetime | None = None) -> datetime | None:
    """The entry's first slot after ``after`` (default now); ``None`` when none is left
    (a one-off date passed) or the entry decides by its own ``is_due``."""
    slots = slots_of(entry)
    start = _aware(after, datetime.now(UTC))
    if slots is None:
        return None
    slot = slots.next_after(math.floor(start.timestamp() * 1000))
    return None if slot is None else ms_to_datetime(slot)


def remaining_estimate(entry: Any, last_run_at: datetime | None = None) -> timedelta | None:
    """Celery's ``remaining_estimate``: from now until the run after ``last_run_at``
    (default the entry's ``last_run_at``, else now); negative when that run is overdue;
    ``None`` when no run is left."""
    now = datetime.now(UTC)
    last = _aware(last_run_at if last_run_at is not None else entry.last_run_at, now)
    if slots_of(entry) is None:
        return entry.schedule.remaining_estimate(last)  # type: ignore[no-any-return]
    upcoming = next_run(entry, last)
    return None if upcoming is None else upcoming - now


def is_due(entry: Any, last_run_at: datetime | None = None) -> tuple[bool, float]:
    """Celery's ``schedstate(is_due, next)``: due when a slot came after ``last_run_at``
    (default the entry's ``last_run_at``; none known: not due) and the entry is
    enabled; ``next``: seconds until the next slot after now (the interval to check
    again; a large number when none is left)."""
    from celery.schedules import schedstate

    now = datetime.now(UTC)
    last = last_run_at if last_run_at is not None else entry.last_run_at
    if slots_of(entry) is None:
        state = entry.schedule.is_due(_aware(last, now))
        return schedstate(bool(state[0]) and bool(entry.enabled), state[1])
    following = next_run(entry, now)
    wait = (following - now).total_seconds() if following is not None else 365 * 86400.0
    if last is None or not entry.enabled:
        return schedstate(False, wait)
    due_at = next_run(entry, _aware(last, now))
    return schedstate(due_at is not None and due_at <= now, wait)


__all__ = ["is_due", "next_run", "remaining_estimate", "slots_of"]
