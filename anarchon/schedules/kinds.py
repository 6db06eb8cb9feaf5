"""Pure slot maths: when each job runs. No I/O; every instance computes the same slots.

A slot is the scheduled instant in integer epoch milliseconds.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from functools import lru_cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter

UTC = timezone.utc
_MARGIN = timedelta(hours=3)  # wider than any DST shift in the tz database
_MAX_SLOW_STEPS = 200_000


def ms_to_datetime(ms: int) -> datetime:
    """Epoch milliseconds to an aware UTC datetime."""
    return datetime.fromtimestamp(ms / 1000, UTC)


def datetime_to_ms(value: datetime) -> int:
    """An aware datetime to epoch milliseconds."""
    return round(value.timestamp() * 1000)


def load_timezone(name: object, *, job: str | None = None) -> ZoneInfo:
    """Load an IANA timezone, raising ``ValueError`` (not ``KeyError``) for unknown names."""
    where = f"job {job!r}: " if job else ""
    if isinstance(name, ZoneInfo):
        return name
    if not isinstance(name, str):
        raise TypeError(f"{where}timezone must be an IANA name such as 'Europe/Berlin', "
                        f"got {type(name).__name__}: {name!r}")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError) as exc:
        raise ValueError(f"{where}unknown timezone {name!r}: use an IANA name such as "
                         "'UTC' or 'Europe/Berlin'") from exc


class Schedule(ABC):
    """When a job runs. Implementations are pure and identical on every instance."""

    kind: str

    @abstractmethod
    def next_after(self, after_ms: int) -> int | None:
        """The first slot strictly after ``after_ms``, or ``None`` if there is none."""

    @abstractmethod
    def describe(self) -> str:
        """The schedule in a few plain words."""

    def slots_between(self, start_ms: int, end_ms: int) -> Iterator[int]:
        """Slots in ``(start_ms, end_ms]``, oldest first."""
        slot = self.next_after(start_ms)
        while slot is not None and slot <= end_ms:
            yield slot
            slot = self.next_after(slot)

    def latest_at_or_before(self, now_ms: int, window_ms: int) -> int | None:
        """The newest slot in ``(now_ms - window_ms, now_ms]``, if any (used by catch-up)."""
        latest = None
        for slot in self.slots_between(now_ms - window_ms, now_ms):
            latest = slot
        return latest


class EverySchedule(Schedule):
    """Every ``interval_ms`` on the UTC epoch grid, shifted by ``offset_ms``."""

    kind = "every"

    def __init__(self, interval_ms: int, offset_ms: int = 0) -> None:
        if interval_ms <= 0:
            raise ValueError(f"interval must be positive, got {interval_ms} ms")
        self.interval_ms = interval_ms
        self.offset_ms = offset_ms % interval_ms

    def next_after(self, after_ms: int) -> int:
        steps = (after_ms - self.offset_ms) // self.interval_ms + 1
        return steps * self.interval_ms + self.offset_ms

    def latest_at_or_before(self, now_ms: int, window_ms: int) -> int | None:
        slot = (now_ms - self.offset_ms) // self.interval_ms * self.interval_ms + self.offset_ms
        return slot if slot > now_ms - window_ms else None

    def describe(self) -> str:
        text = f"every {_format_ms(self.interval_ms)}"
        return f"{text} (offset {_format_ms(self.offset_ms)})" if self.offset_ms else text


class CronSchedule(Schedule):
    """A cron expression (5 fields, or 6 with seconds first) on a timezone's wall clock.

    DST follows cron: a fixed hour that falls in a gap runs at the shifted time (02:30 ->
    03:30); a fixed hour in a repeated hour runs only at its first occurrence; hours given
    as ``*`` or a step run every real hour, both occurrences of a repeated hour included.
    """

    kind = "cron"

    def __init__(self, expr: str, tz: ZoneInfo) -> None:
        if not isinstance(expr, str):
            raise TypeError(f"cron expression must be a str, got {type(expr).__name__}")
        fields = expr.split()
        if len(fields) not in (5, 6):
            raise ValueError(f"invalid cron expression {expr!r}: expected 5 fields "
                             "(minute hour day month weekday) or 6 with seconds first")
        self.expr = " ".join(fields)
        self.tz = tz
        self._seconds = len(fields) == 6
        hour = fields[2 if self._seconds else 1]
        self._repeat_folds = "*" in hour or "/" in hour
        try:
            # parsed, checked and answered once per (expression, timezone): a tenant-style
            # registry holds 100,000 jobs of a few hundred expressions
            self._answers = _answers_of(type(self), self.expr, tz)
        except Exception as exc:  # croniter raises several types for bad input
            raise ValueError(f"invalid cron expression {expr!r}: {exc}") from exc

    def _iter(self, start: datetime) -> croniter:
        return croniter(self.expr, start, second_at_beginning=self._seconds)

    def _instants(self, wall: datetime) -> list[int]:
        first = wall.replace(tzinfo=self.tz, fold=0)
        second = wall.replace(tzinfo=self.tz, fold=1)
        if first.utcoffset() == second.utcoffset():
            return [datetime_to_ms(first)]
        round_trip = first.astimezone(UTC).astimezone(self.tz).replace(tzinfo=None)
        if round_trip != wall or not self._repeat_folds:
            # In a gap fold=0 maps to the shifted instant; in a repeat it is the first one.
            return [datetime_to_ms(first)]
        return [datetime_to_ms(first), datetime_to_ms(second)]

    def _stable(self, wall: datetime) -> bool:
        offsets = {
            (wall + delta).replace(tzinfo=self.tz, fold=fold).utcoffset()
            for delta in (-_MARGIN, timedelta(0), _MARGIN)
            for fold in (0, 1)
        }
        return len(offsets) == 1

    def next_after(self, after_ms: int) -> int | None:
        found, slot = self._answers.lookup(after_ms)
        if not found:
            slot = self._next_after(after_ms)
            self._answers.remember(after_ms, slot)
        return slot

    def _next_after(self, after_ms: int) -> int | None:
        local = ms_to_datetime(after_ms).astimezone(self.tz).replace(tzinfo=None)
        try:
            wall = self._iter(local).get_next(datetime)
        except Exception:  # croniter gives up on expressions that never match again
            return None
        if self._stable(local) and self._stable(wall):
            return self._instants(wall)[0]
        return self._next_near_transition(local, after_ms)

    def _next_near_transition(self, local: datetime, after_ms: int) -> int | None:
        iterator = self._iter(local - _MARGIN)
        best: int | None = None
        best_wall: datetime | None = None
        for _ in range(_MAX_SLOW_STEPS):
            wall = iterator.get_next(datetime)
            if best_wall is not None and wall > best_wall + _MARGIN:
                break
            for instant in self._instants(wall):
                if instant > after_ms and (best is None or instant < best):
                    best, best_wall = instant, wall
        return best

    def describe(self) -> str:
        return f"cron '{self.expr}' ({self.tz.key})"


class _Answers:
    """The latest answers of ``next_after`` for one (cron expression, timezone), shared by
    every ``CronSchedule`` of it. An answer ``(after, slot)`` says no slot lies in
    ``(after, slot)``, so it also answers every ``after <= t < slot`` (``slot`` None: none
    after ``after`` at all): every job of the expression planned in the same minute asks
    croniter nothing. A few are kept, as the planner asks both for a job's next slot and
    for the slot after it."""

    KEPT = 4

    def __init__(self) -> None:
        # replaced whole, never changed in place: instances in other threads may read it
        self._kept: tuple[tuple[int, int | None], ...] = ()

    def lookup(self, after_ms: int) -> tuple[bool, int | None]:
        """``(True, slot)`` if a kept answer covers ``after_ms``, else ``(False, None)``."""
        for after, slot in self._kept:
            if after <= after_ms and (slot is None or after_ms < slot):
                return True, slot
        return False, None

    def remember(self, after_ms: int, slot: int | None) -> None:
        """Keep ``next_after(after_ms) == slot`` (newest first)."""
        self._kept = ((after_ms, slot), *self._kept[:self.KEPT - 1])


@lru_cache(maxsize=65_536)
def _answers_of(kind: type, expr: str, tz: ZoneInfo) -> _Answers:
    """The shared answers of ``expr`` (normalised) in ``tz`` for schedules of class ``kind``
    (a subclass may answer otherwise), after checking croniter parses it (its exception
    propagates, and nothing is cached)."""
    croniter(expr, datetime(2000, 1, 1),
             second_at_beginning=len(expr.split()) == 6).get_next(datetime)
    return _Answers()


class AtSchedule(Schedule):
    """One run at a fixed instant."""

    kind = "at"

    def __init__(self, slot_ms: int) -> None:
        self.slot_ms = slot_ms

    def next_after(self, after_ms: int) -> int | None:
        return self.slot_ms if self.slot_ms > after_ms else None

    def describe(self) -> str:
        return f"at {ms_to_datetime(self.slot_ms).isoformat()}"


#: the last millisecond an ``at()`` job may run at: 9999-12-31T23:59:59.999Z
AT_MAX_MS = 253_402_300_799_999


def parse_at(when: object, *, job: str | None = None) -> int:
    """An aware ``datetime``, epoch seconds or an ISO-8601 string with offset -> epoch ms."""
    where = f"job {job!r}: " if job else ""
    if isinstance(when, bool):
        raise TypeError(f"{where}at() takes a datetime, epoch seconds or ISO string, got bool")
    if isinstance(when, (int, float)):
        if not math.isfinite(when):
            raise ValueError(f"{where}at() needs a finite epoch time, got {when!r}")
        if not 0 <= when * 1000 <= AT_MAX_MS:
            raise ValueError(f"{where}at() needs a time in the years 1970 to 9999, got "
                             f"{when!r}")
        return round(when * 1000)
    if isinstance(when, str):
        text = when.strip()
        if text.endswith(("Z", "z")):
            text = text[:-1] + "+00:00"
        try:
            when = datetime.fromisoformat(text)
        except ValueError as exc:
            raise ValueError(f"{where}cannot read {when!r} as an ISO-8601 date and time") from exc
    if isinstance(when, datetime):
        if when.tzinfo is None or when.utcoffset() is None:
            raise ValueError(f"{where}at() needs an aware datetime (with a timezone or "
                             f"offset, e.g. '2026-12-24T18:00:00Z'), got naive {when!r}")
        ms = datetime_to_ms(when)
        if not 0 <= ms <= AT_MAX_MS:
            raise ValueError(f"{where}at() needs a time in the years 1970 to 9999, got "
                             f"{when.isoformat()}")
        return ms
    raise TypeError(f"{where}at() takes an aware datetime, epoch seconds or an ISO-8601 "
                    f"string, got {type(when).__name__}: {when!r}")


def _format_ms(ms: int) -> str:
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000)):
        if ms % size == 0:
            return f"{ms // size}{unit}"
    return f"{ms}ms"
