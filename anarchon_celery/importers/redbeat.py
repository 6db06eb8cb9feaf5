"""Read celery-redbeat's entries from Redis as [`Source`][anarchon_celery.importers.plan.Source]s.

redbeat keeps one hash per entry at ``<prefix><name>`` with a ``definition`` field (JSON
of name, task, schedule, args, kwargs, options, enabled; schedules and datetimes tagged
with ``__type__``) and a ``meta`` field (``last_run_at``), plus ``<prefix>:schedule``,
``<prefix>:statics`` (names from ``beat_schedule``) and ``<prefix>:lock``. The JSON is
decoded here (redbeat itself need not be installed); only reads are made.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from typing import Any
from zoneinfo import ZoneInfo

from anarchon_celery.entries.entry import Entry
from anarchon_celery.importers.plan import Source, describe_schedule

_SPECIAL = ("*", "?", "[", "]", "\\")


class _Refused:
    """A decoded value the importer cannot carry over (``why`` says what it was)."""

    def __init__(self, why: str) -> None:
        self.why = why

    def __repr__(self) -> str:
        return f"<{self.why}>"


def _decode_object(data: dict[str, Any]) -> Any:
    kind = data.get("__type__")
    if kind is None:
        return data
    if kind == "datetime":
        zone = data.get("timezone", "UTC")
        fields = {k: int(data[k]) for k in ("year", "month", "day", "hour", "minute",
                                            "second", "microsecond")}
        tz: Any = (timezone(timedelta(seconds=float(zone)))
                   if isinstance(zone, (int, float)) else ZoneInfo(str(zone)))
        return datetime(tzinfo=tz, **fields)
    if kind == "interval":
        return {"__interval__": float(data["every"]), "relative": bool(data.get("relative"))}
    if kind == "crontab":
        from celery.schedules import crontab

        return crontab(minute=data["minute"], hour=data["hour"],
                       day_of_week=data["day_of_week"], day_of_month=data["day_of_month"],
                       month_of_year=data["month_of_year"])
    if kind == "rrule":
        freq = data.get("freq")
        names = ("YEARLY", "MONTHLY", "WEEKLY", "DAILY", "HOURLY", "MINUTELY", "SECONDLY")
        shown = names[freq] if isinstance(freq, int) and 0 <= freq < len(names) else freq
        return _Refused(f"rrule(freq={shown}, interval={data.get('interval')})")
    return _Refused(f"{kind} value")


def decode(text: str | bytes) -> Any:
    """redbeat's JSON, tagged values decoded."""
    return json.loads(text, object_hook=_decode_object)


def _glob_escape(prefix: str) -> str:
    return "".join("\\" + c if c in _SPECIAL else c for c in prefix)


def read_sources(app: Any, client: Any, prefix: str) -> list[Source]:
    """Every redbeat entry under ``prefix`` (``client``: a ``redis.Redis``)."""
    special = {prefix + ":schedule", prefix + ":statics", prefix + ":lock"}
    statics = {_text(n) for n in client.smembers(prefix + ":statics")}
    keys = sorted(_text(k) for k in client.scan_iter(match=_glob_escape(prefix) + "*",
                                                      count=500))
    sources = []
    for key in keys:
        if key in special or client.type(key) not in (b"hash", "hash"):
            continue
        definition, meta = client.hmget(key, ["definition", "meta"])
        if not definition:
            continue
        name = key[len(prefix):]
        sources.append(_source(app, name, definition, meta, name in statics))
    return sources


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _source(app: Any, name: str, definition: Any, meta: Any, static: bool) -> Source:
    try:
        data = decode(definition)
        last = decode(meta).get("last_run_at") if meta else None
    except (ValueError, KeyError, TypeError) as exc:
        return Source(name, "unreadable definition", reason=f"cannot decode: {exc}")
    schedule = data.get("schedule")
    enabled = bool(data.get("enabled", True))
    note = ""
    if isinstance(schedule, dict) and "__interval__" in schedule:
        if schedule["relative"]:
            note = "relative=True dropped: on the UTC grid"
        schedule = timedelta(seconds=schedule["__interval__"])
    old = describe_schedule(schedule) if not isinstance(schedule, _Refused) else repr(schedule)
    old += f", last run {last.isoformat() if isinstance(last, datetime) else 'never'}"
    if not enabled:
        old += ", disabled"
    if static:
        return Source(name, old, reason="a static entry (redbeat copied it from "
                      "beat_schedule): keep it in beat_schedule, the anarchon beats run it")
    if isinstance(schedule, _Refused):
        return Source(name, old, reason=f"its {schedule.why} schedule has no every/cron/at "
                      "equivalent; re-create it as a crontab or interval")
    for field in ("args", "kwargs", "options"):
        if _holds_refused(data.get(field)):
            return Source(name, old, reason=f"{field} hold a value redbeat pickled or "
                          "tagged that cannot be stored as JSON")
    entry = Entry(app, name, str(data.get("task") or ""), schedule,
                  list(data.get("args") or ()), dict(data.get("kwargs") or {}),
                  dict(data.get("options") or {}), enabled=enabled)
    return Source(name, old, entry, note=note)


def _holds_refused(value: Any) -> bool:
    if isinstance(value, _Refused):
        return True
    if isinstance(value, dict):
        return any(_holds_refused(v) for v in value.values())
    if isinstance(value, list):
        return any(_holds_refused(v) for v in value)
    return False


__all__ = ["decode", "read_sources"]
