"""What a job's control record means: paused, a schedule override, or a dynamic job.

The store keeps the record as JSON text with a version (``anarchon.backends.control``);
this module is the one place that writes and reads that text, and checks what a caller
asks for (``pause()``, ``reschedule()``, ``add_job()``) before anything is stored.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from ..durations import parse_duration
from ..schedules.custom import build_custom, check_custom
from ..schedules.kinds import ms_to_datetime

Source = Literal["code", "override", "dynamic"]
Action = Literal["pause", "resume", "reschedule", "reset", "add", "update", "remove"]
ScheduleKind = Literal["every", "cron", "at", "custom"]

#: job options a dynamic job may set (``data`` is never stored: use ``params``)
DYNAMIC_OPTIONS = frozenset({"jitter", "max_late", "timeout", "overlap", "max_attempts",
                             "catch_up", "history_size", "history_ttl"})


@dataclass(frozen=True)
class ScheduleSpec:
    """A schedule as stored: ``every`` seconds (+ ``offset``), a ``cron`` expression in
    ``timezone``, one ``at`` instant (ISO 8601), or a ``custom`` schedule type's data
    (``{"type": name, "data": {...}}``, see ``anarchon.schedules.custom``)."""

    kind: ScheduleKind
    when: Any  # seconds (every), expression (cron), ISO text (at) or type + data (custom)
    offset: float = 0.0
    timezone: str = "UTC"

    @classmethod
    def choose(cls, *, every: Any = None, cron: Any = None, at: Any = None,
               timezone: Any = None, offset: Any = None, custom: Any = None,
               job: str) -> ScheduleSpec:
        """The one schedule a caller gave (exactly one of ``every``/``cron``/``at``/
        ``custom``); ``offset`` only with ``every``, ``timezone`` only with ``cron``.
        Raises ``TypeError`` naming the job and what was wrong."""
        given = [kind for kind, value in (("every", every), ("cron", cron), ("at", at),
                                          ("custom", custom)) if value is not None]
        if len(given) != 1:
            raise TypeError(f"job {job!r}: give exactly one of every=, cron=, at= or "
                            f"custom=, got {', '.join(given) or 'none'}")
        if offset is not None and every is None:
            raise TypeError(f"job {job!r}: offset= goes with every= only")
        if timezone is not None and cron is None:
            raise TypeError(f"job {job!r}: timezone= goes with cron= only")
        if every is not None:
            seconds = parse_duration(every, option=f"job {job!r}: every")
            shift = 0.0 if offset is None else parse_duration(offset,
                                                              option=f"job {job!r}: offset")
            return cls("every", seconds, offset=shift)
        if cron is not None:
            if not isinstance(cron, str):
                raise TypeError(f"job {job!r}: cron must be a str, got {cron!r}")
            zone = "UTC" if timezone is None else timezone
            if not isinstance(zone, str):
                raise TypeError(f"job {job!r}: timezone must be a str, got {zone!r}")
            return cls("cron", cron, timezone=zone)
        if custom is not None:
            return cls("custom", check_custom(custom, job))
        if isinstance(at, datetime):
            if at.tzinfo is None:
                raise ValueError(f"job {job!r}: at= needs an aware datetime (with tzinfo)")
            return cls("at", at.isoformat())
        if not isinstance(at, str):
            raise TypeError(f"job {job!r}: at= must be an aware datetime or ISO 8601 text, "
                            f"got {at!r}")
        return cls("at", at)

    def options(self) -> dict[str, Any]:
        """The schedule's own job options (``offset`` or ``timezone``)."""
        if self.kind == "every":
            return {"offset": self.offset}
        if self.kind == "cron":
            return {"timezone": self.timezone}
        return {}

    def describe(self) -> str:
        """Human text: ``every 300s``, ``cron 0 3 * * * (Europe/Berlin)``, ``at …``."""
        if self.kind == "every":
            extra = f" +{self.offset:g}s" if self.offset else ""
            return f"every {self.when:g}s{extra}"
        if self.kind == "cron":
            return f"cron {self.when} ({self.timezone})"
        if self.kind == "custom":
            try:  # the type's own words where this process registered it
                return build_custom(self.when, "").describe()
            except (TypeError, ValueError):  # unregistered here, or a malformed record
                return f"custom {json.dumps(self.when, sort_keys=True, default=repr)}"
        return f"at {self.when}"

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"kind": self.kind, "when": self.when}
        data.update(self.options())
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ScheduleSpec:
        kind = data["kind"]
        if kind not in ("every", "cron", "at", "custom"):
            raise ValueError(f"unknown schedule kind {kind!r}")
        return cls(kind, data["when"], offset=float(data.get("offset", 0.0)),
                   timezone=str(data.get("timezone", "UTC")))


@dataclass(frozen=True)
class Dynamic:
    """A job that lives in the store: the handler name instances look up, its JSON
    ``params`` (stored: never secrets) and its job options."""

    handler: str
    params: Any = None
    options: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Control:
    """A job's control record. ``schedule`` replaces a code job's schedule (an
    override) or is a dynamic job's schedule; ``removed``: a dynamic job that was
    removed (the record stays, so its version keeps fencing old claims)."""

    paused: bool = False
    schedule: ScheduleSpec | None = None
    dynamic: Dynamic | None = None
    removed: bool = False
    #: the change that wrote this record and who made it (for the instances applying it)
    action: str = ""
    by: str = ""

    @property
    def source(self) -> Source:
        """Where the job's effective schedule comes from."""
        if self.dynamic is not None:
            return "dynamic"
        return "override" if self.schedule is not None else "code"

    def encode(self) -> str:
        """The record's JSON text (what the store keeps)."""
        data: dict[str, Any] = {"paused": self.paused, "removed": self.removed,
                                "action": self.action, "by": self.by}
        if self.schedule is not None:
            data["schedule"] = self.schedule.to_json()
        if self.dynamic is not None:
            data["dynamic"] = {"handler": self.dynamic.handler, "params": self.dynamic.params,
                               "options": dict(self.dynamic.options)}
        return json.dumps(data, sort_keys=True, separators=(",", ":"))

    @classmethod
    def decode(cls, text: str) -> Control:
        """Read a record's text; raises ``ValueError`` on a record this version of
        anarchon cannot read."""
        try:
            data = json.loads(text)
            schedule = data.get("schedule")
            dynamic = data.get("dynamic")
            return cls(
                paused=bool(data.get("paused", False)),
                schedule=None if schedule is None else ScheduleSpec.from_json(schedule),
                dynamic=None if dynamic is None else Dynamic(
                    str(dynamic["handler"]), dynamic.get("params"),
                    dict(dynamic.get("options") or {})),
                removed=bool(data.get("removed", False)),
                action=str(data.get("action", "")),
                by=str(data.get("by", "")),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ValueError(f"unreadable control record {text[:200]!r}: {exc}") from exc


@dataclass(frozen=True)
class Change:
    """One entry of a job's change log (``changes()``): who changed what, when."""

    name: str
    version: int
    action: Action
    by: str
    at: datetime
    detail: Mapping[str, Any] = field(default_factory=dict)

    def encode(self) -> str:
        return json.dumps({"job": self.name, "version": self.version, "action": self.action,
                           "by": self.by, "at": int(self.at.timestamp() * 1000),
                           "detail": dict(self.detail)}, sort_keys=True)

    @classmethod
    def decode(cls, text: str) -> Change:
        data = json.loads(text)
        return cls(str(data["job"]), int(data["version"]), data["action"], str(data["by"]),
                   ms_to_datetime(int(data["at"])), dict(data.get("detail") or {}))


def check_params(params: Any, job: str) -> Any:
    """``params`` as stored: JSON-serialisable (no NaN), else ``TypeError``."""
    try:
        json.dumps(params, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"job {job!r}: params must be JSON-serialisable: {exc}") from exc
    return params


def check_dynamic_options(options: Mapping[str, Any], job: str) -> dict[str, Any]:
    """The job options of a dynamic job, as stored (JSON values; ``data`` refused)."""
    if "data" in options:
        raise TypeError(f"job {job!r}: a dynamic job takes params=, not data= (data is "
                        "never stored; params is, so it must not hold secrets)")
    unknown = set(options) - DYNAMIC_OPTIONS
    if unknown:
        raise TypeError(f"job {job!r}: unknown option(s) {sorted(unknown)}; a dynamic job "
                        f"takes {sorted(DYNAMIC_OPTIONS)}")
    stored: dict[str, Any] = {}
    for key, value in options.items():
        if hasattr(value, "total_seconds"):
            value = value.total_seconds()
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"job {job!r}: {key} must be finite, got {value!r}")
        try:
            json.dumps(value)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"job {job!r}: option {key} must be a number, text or null to "
                            f"be stored, got {value!r}") from exc
        stored[key] = value
    return stored
