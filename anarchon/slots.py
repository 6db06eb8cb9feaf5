"""Deprecated alias of ``anarchon.schedules`` (kept for one release).

Import ``Schedule`` and its kinds from ``anarchon.schedules`` instead.
"""

from __future__ import annotations

import warnings

from .schedules.kinds import (
    AtSchedule,
    CronSchedule,
    EverySchedule,
    Schedule,
    datetime_to_ms,
    load_timezone,
    ms_to_datetime,
    parse_at,
)

warnings.warn("anarchon.slots is deprecated: import from anarchon.schedules",
              DeprecationWarning, stacklevel=2)

__all__ = ["AtSchedule", "CronSchedule", "EverySchedule", "Schedule", "datetime_to_ms",
           "load_timezone", "ms_to_datetime", "parse_at"]
