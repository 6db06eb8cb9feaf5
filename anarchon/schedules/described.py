"""A schedule read back from its description (``Schedule.describe()``), as stores keep
it with a job's registration: so a process that does not declare a job (the ``anarchon``
command, the admin) can still tell its next slot.

Only the built-in kinds are read back (``every``, ``cron``, ``at``); a custom kind, or a
description this module cannot parse, gives ``None``.
"""

from __future__ import annotations

import re
from datetime import datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from .kinds import AtSchedule, CronSchedule, EverySchedule, Schedule

_UNITS = {"d": 86_400_000, "h": 3_600_000, "m": 60_000, "s": 1000, "ms": 1}
_AMOUNT = r"(\d+)(ms|d|h|m|s)"
_EVERY = re.compile(rf"every {_AMOUNT}(?: \(offset {_AMOUNT}\))?")
_CRON = re.compile(r"cron '([^']+)' \(([^)]+)\)")
_AT = re.compile(r"at (\S+)")


def described_schedule(kind: str, description: str) -> Schedule | None:
    """The schedule ``description`` describes, for a job of ``kind``; ``None`` when it
    cannot be read back."""
    try:
        if kind == "every" and (m := _EVERY.fullmatch(description)):
            offset = int(m[3]) * _UNITS[m[4]] if m[3] else 0
            return EverySchedule(int(m[1]) * _UNITS[m[2]], offset)
        if kind == "cron" and (m := _CRON.fullmatch(description)):
            return CronSchedule(m[1], ZoneInfo(m[2]))
        if kind == "at" and (m := _AT.fullmatch(description)):
            return AtSchedule(int(datetime.fromisoformat(m[1]).timestamp() * 1000))
    except (ValueError, ZoneInfoNotFoundError):
        return None
    return None


def next_slot_ms(kind: str, description: str, after_ms: int) -> int | None:
    """The first slot after ``after_ms`` of the described schedule, if it can be read."""
    schedule = described_schedule(kind, description)
    return None if schedule is None else schedule.next_after(after_ms)


__all__ = ["described_schedule", "next_slot_ms"]
