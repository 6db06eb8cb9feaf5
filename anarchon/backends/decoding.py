"""Reading records a store holds that may not be anarchon's (hand-written, truncated, of
another version): one that cannot be decoded is skipped and logged once (WARNING, naming
the store, the key or row, and why), and the rest is returned. A read never fails as a
whole because of one record, and a data error is never reported as an outage."""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timezone
from typing import Any, TypeVar

from ..history import RUN_REASONS, RUN_STATUSES, RunRecord

logger = logging.getLogger("anarchon")

T = TypeVar("T")
R = TypeVar("R")

#: what decoding a record that is not anarchon's raises (json's error is a ValueError)
DECODE_ERRORS: tuple[type[Exception], ...] = (
    ValueError, TypeError, KeyError, IndexError, OverflowError, AttributeError)

#: records already logged (bounded: a process reading many bad records forgets the oldest)
_LOGGED: OrderedDict[str, None] = OrderedDict()
_LOGGED_MAX = 1024


def skipped(where: str, what: str, error: BaseException) -> None:
    """Log once (per ``where`` and ``what``) that a record was skipped."""
    key = f"{where}\0{what}"
    if key in _LOGGED:
        _LOGGED.move_to_end(key)
        logger.debug("skipped an unreadable record again: %s: %s", where, what)
        return
    _LOGGED[key] = None
    if len(_LOGGED) > _LOGGED_MAX:
        _LOGGED.popitem(last=False)
    logger.warning("skipped a record that is not anarchon's format (%s: %s): %s: %s; the "
                   "rest was read. Delete or fix that record (logged once)", where, what,
                   type(error).__name__, str(error)[:200])


def readable(items: Iterable[T], decode: Callable[[T], R], where: str,
             what: Callable[[T], str]) -> list[R]:
    """``decode`` of each item; an item it cannot decode is skipped and logged once by
    ``where`` (the store and table or key) and ``what(item)`` (its field or row)."""
    out: list[R] = []
    for item in items:
        try:
            out.append(decode(item))
        except DECODE_ERRORS as exc:
            skipped(where, _short(what, item), exc)
    return out


def _short(what: Callable[[T], str], item: T) -> str:
    try:
        return what(item)[:300]
    except Exception:  # describing a bad record must not fail the read
        return repr(item)[:300]


def checked(record: RunRecord) -> RunRecord:
    """``record`` if its status and reason are ones anarchon writes, else ValueError."""
    if record.status not in RUN_STATUSES:
        raise ValueError(f"unknown status {record.status!r}")
    if record.reason not in RUN_REASONS:
        raise ValueError(f"unknown reason {record.reason!r}")
    for value in (record.slot, record.attempt):
        if not isinstance(value, int) or isinstance(value, bool):
            raise TypeError(f"not an integer: {value!r}")
    return record


def ms_datetime(ms: float) -> datetime:
    """A store time (ms since the epoch, UTC); ValueError/OverflowError/TypeError when it
    is no time."""
    if isinstance(ms, bool) or not isinstance(ms, (int, float)):
        raise TypeError(f"not a time in ms: {ms!r}")
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc)


__all__ = ["DECODE_ERRORS", "checked", "ms_datetime", "readable", "skipped"]


def history_row(row: Sequence[Any]) -> RunRecord:
    """A SQL store's history row ``(job, slot, instance, manual, attempt, reason, status,
    started, finished, error)`` as a checked [`RunRecord`][anarchon.history.RunRecord]
    (ValueError etc. when a value is not what anarchon writes: SQLite keeps any type)."""
    job, slot, instance, manual, attempt, reason, status, started, finished, error = row
    return checked(RunRecord(
        name=job, slot=int(slot), scheduled_at=ms_datetime(int(slot)),
        instance_id=instance, manual=bool(manual), attempt=int(attempt),
        reason=reason, status=status, started_at=ms_datetime(int(started)),
        finished_at=None if finished is None else ms_datetime(int(finished)),
        duration=None if finished is None else (int(finished) - int(started)) / 1000,
        error=error))
