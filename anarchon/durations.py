"""Parse durations: seconds, ``timedelta`` or strings such as ``"1h30m"``."""

from __future__ import annotations

import math
import re
from datetime import timedelta
from typing import TypeAlias

DurationLike: TypeAlias = "int | float | str | timedelta"
"""What every duration option accepts: seconds, a ``timedelta`` or a string like ``"1h30m"``."""

_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w)")
_WHOLE = re.compile(r"(?:\d+(?:\.\d+)?(?:ms|s|m|h|d|w))+")


def parse_duration(value: object, *, option: str = "duration") -> float:
    """Return ``value`` in seconds.

    Accepts ``int``/``float`` seconds, a ``timedelta``, a numeric string (seconds) or
    unit strings: ``"500ms"``, ``"10s"``, ``"35m"``, ``"1h30m"``, ``"2d"``, ``"1w"``.
    Negative, non-finite and malformed values raise ``ValueError``; other types raise
    ``TypeError``. ``option`` names the option in error messages.
    """
    if isinstance(value, bool):
        raise TypeError(f"{option} must be a duration (seconds, timedelta or '10s'), got bool")
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, (int, float)):
        seconds = float(value)
    elif isinstance(value, str):
        seconds = _parse_text(value, option)
    else:
        raise TypeError(
            f"{option} must be a duration (seconds, timedelta or a string like '10s'), "
            f"got {type(value).__name__}: {value!r}"
        )
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"{option} must be a finite, non-negative duration, got {value!r}")
    return seconds


def _parse_text(text: str, option: str) -> float:
    compact = text.strip().lower().replace(" ", "")
    try:
        return float(compact)
    except ValueError:
        pass
    if not compact or not _WHOLE.fullmatch(compact):
        raise ValueError(
            f"{option}: cannot read {text!r} as a duration; use seconds or units "
            "ms, s, m, h, d, w such as '500ms', '10s', '1h30m', '2d'"
        )
    return sum(float(number) * _UNIT_SECONDS[unit] for number, unit in _PART.findall(compact))


def to_ms(seconds: float) -> int:
    """Seconds to whole milliseconds (rounded)."""
    return round(seconds * 1000)
