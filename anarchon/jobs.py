"""Job and scheduler options: converted and checked once, when they are given."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from .durations import parse_duration, to_ms
from .slots import AtSchedule, CronSchedule, EverySchedule, Schedule, load_timezone, parse_at

Handler = Callable[..., Any]
NO_DATA: Any = object()  # a level that gave no ``data``
Overlap = Literal["skip", "allow"]

#: options a claim-only backend cannot honour (they need a lease)
LEASE_ONLY_OPTIONS = ("lease", "heartbeat", "overlap", "max_attempts", "catch_up")

_JOB_DEFAULTS: dict[str, Any] = {
    "jitter": 2.0,
    "max_late": 60.0,
    "timeout": None,
    "overlap": "skip",
    "max_attempts": 3,
    "catch_up": 300.0,
    "offset": 0.0,
    "timezone": "UTC",
    "history_size": 100,
    "history_ttl": None,
    "data": None,
}
JOB_OPTIONS = frozenset(_JOB_DEFAULTS)
SCHEDULER_OPTIONS = JOB_OPTIONS | {"lease", "heartbeat"}


@dataclass(frozen=True)
class SchedulerOptions:
    """Scheduler-wide settings and the defaults every job inherits."""

    lease: float = 30.0
    heartbeat: float = 5.0
    defaults: Mapping[str, Any] = field(default_factory=dict)
    explicit: frozenset[str] = frozenset()

    @classmethod
    def build(cls, options: Mapping[str, Any]) -> SchedulerOptions:
        unknown = set(options) - SCHEDULER_OPTIONS
        if unknown:
            raise TypeError(f"unknown scheduler option(s) {sorted(unknown)}; "
                            f"known options: {sorted(SCHEDULER_OPTIONS)}")
        lease = _positive(options.get("lease", 30.0), "lease", None)
        heartbeat = _positive(options.get("heartbeat", 5.0), "heartbeat", None)
        if heartbeat >= lease:
            raise ValueError(f"heartbeat ({heartbeat:g}s) must be shorter than lease "
                             f"({lease:g}s); e.g. lease='30s', heartbeat='5s'")
        defaults = dict(_JOB_DEFAULTS)
        job_level = {k: v for k, v in options.items() if k in JOB_OPTIONS}
        defaults.update(_convert(job_level, job=None, kind=None))
        return cls(lease, heartbeat, defaults, frozenset(options))


@dataclass(frozen=True)
class Job:
    """A registered job: its schedule, its handler and its resolved options."""

    name: str
    schedule: Schedule
    handler: Handler
    jitter: float
    max_late: float
    timeout: float | None
    overlap: Overlap
    max_attempts: int
    catch_up: float
    history_size: int
    history_ttl: float | None
    data: Any
    explicit: Mapping[str, Any]

    @property
    def is_async(self) -> bool:
        return inspect.iscoroutinefunction(self.handler) or inspect.iscoroutinefunction(
            getattr(self.handler, "__call__", None)  # noqa: B004 - async callable objects
        )

    @property
    def retain_runs_ms(self) -> int:
        """How long finished run rows are kept so a late claimer still sees them."""
        return retention_ms(self.max_late, self.catch_up, self.jitter)


def retention_ms(max_late: float, catch_up: float, jitter: float) -> int:
    """The one retention rule of finished run rows (ms): a row must outlive every claim
    of its slot that could still arrive, the latest being ``max(max_late, catch_up)``
    plus ``jitter`` after the slot, and an hour's margin covers clock skew and paused
    claimers. Deleting a row earlier would let a late claimer run the slot again."""
    return to_ms(max(max_late, catch_up) + jitter) + 3_600_000


#: the retention of a job with default options (used where the job is unknown: trackers)
DEFAULT_RETAIN_RUNS_MS = retention_ms(_JOB_DEFAULTS["max_late"], _JOB_DEFAULTS["catch_up"],
                                      _JOB_DEFAULTS["jitter"])


def build_schedule(kind: str, name: str, when: Any, options: Mapping[str, Any]) -> Schedule:
    """The schedule of a new job; ``options`` are already converted."""
    if kind == "every":
        if isinstance(when, bool) or (not isinstance(when, (int, float, str)) and not hasattr(
            when, "total_seconds"
        )):
            raise TypeError(f"job {name!r}: interval must be a duration (seconds, timedelta "
                            f"or '10s'), got {type(when).__name__}: {when!r}")
        seconds = parse_duration(when, option=f"job {name!r}: interval")
        if to_ms(seconds) <= 0:
            raise ValueError(f"job {name!r}: interval must be positive, got {when!r}")
        return EverySchedule(to_ms(seconds), to_ms(options["offset"]))
    if kind == "cron":
        if not isinstance(when, str):
            raise TypeError(f"job {name!r}: cron expression must be a str, got "
                            f"{type(when).__name__}: {when!r}")
        try:
            return CronSchedule(when, load_timezone(options["timezone"], job=name))
        except ValueError as exc:
            message = str(exc)
            named = f"job {name!r}" in message
            raise ValueError(message if named else f"job {name!r}: {message}") from exc
    if kind == "at":
        return AtSchedule(parse_at(when, job=name))
    raise ValueError(f"unknown schedule kind {kind!r}")


def build_job(
    kind: str,
    name: str,
    when: Any,
    handler: Handler,
    options: Mapping[str, Any],
    scheduler: SchedulerOptions,
    *,
    supports_leases: bool,
    backend_name: str,
) -> Job:
    """Check ``options`` for a ``kind`` job and resolve them against scheduler defaults."""
    if not callable(handler):
        raise TypeError(f"job {name!r}: handler must be callable, got {handler!r}")
    unknown = set(options) - JOB_OPTIONS
    if unknown:
        raise TypeError(f"job {name!r}: unknown option(s) {sorted(unknown)}; "
                        f"known options: {sorted(JOB_OPTIONS)}")
    if kind == "at" and "overlap" in options:
        raise TypeError(f"job {name!r}: at() runs once and takes no 'overlap' option")
    if kind != "every" and "offset" in options:
        raise TypeError(f"job {name!r}: 'offset' only applies to every() jobs")
    if kind != "cron" and "timezone" in options:
        raise TypeError(f"job {name!r}: 'timezone' only applies to cron() jobs")
    if not supports_leases:
        for option in LEASE_ONLY_OPTIONS:
            if option in options:
                raise TypeError(f"job {name!r}: option {option!r} needs a lease backend; "
                                f"backend {backend_name} only picks one winner per slot")
    converted = dict(scheduler.defaults)
    converted.update(_convert(options, job=name, kind=kind))
    schedule = when if isinstance(when, Schedule) else build_schedule(kind, name, when,
                                                                      converted)
    return Job(
        name=name,
        schedule=schedule,
        handler=handler,
        jitter=converted["jitter"],
        max_late=converted["max_late"],
        timeout=converted["timeout"],
        overlap="allow" if kind == "at" else converted["overlap"],
        max_attempts=converted["max_attempts"],
        catch_up=converted["catch_up"] if supports_leases else 0.0,
        history_size=converted["history_size"],
        history_ttl=converted["history_ttl"],
        data=options.get("data", NO_DATA),
        explicit=dict(options),
    )


def merge_data(levels: list[Any]) -> Any:
    """Resolve run data from least to most specific level (scheduler, job, run_now).

    Callables are called (each run); two dicts merge key by key, more specific winning;
    any other value replaces what came before.
    """
    merged: Any = None
    for level in levels:
        if level is NO_DATA:
            continue
        value = level() if callable(level) else level
        if isinstance(merged, dict) and isinstance(value, dict):
            merged = {**merged, **value}
        else:
            merged = value
    return merged


def _convert(options: Mapping[str, Any], *, job: str | None, kind: str | None) -> dict[str, Any]:
    where = f"job {job!r}: " if job else ""
    out: dict[str, Any] = {}
    for key, value in options.items():
        if key in ("jitter", "max_late", "catch_up", "offset"):
            out[key] = parse_duration(value, option=f"{where}{key}")
        elif key in ("timeout", "history_ttl"):
            out[key] = None if value is None else _positive(value, key, job)
        elif key == "overlap":
            if value not in ("skip", "allow"):
                raise ValueError(f"{where}overlap must be 'skip' or 'allow', got {value!r}")
            out[key] = value
        elif key in ("max_attempts", "history_size"):
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"{where}{key} must be an int, got {type(value).__name__}: "
                                f"{value!r}")
            if value < 1:
                raise ValueError(f"{where}{key} must be at least 1, got {value!r}")
            out[key] = value
        elif key == "timezone":
            out[key] = load_timezone(value, job=job).key
        else:  # data: any value; dicts merge, callables are called per run
            out[key] = value
    return out


def _positive(value: Any, option: str, job: str | None) -> float:
    where = f"job {job!r}: " if job else ""
    seconds = parse_duration(value, option=f"{where}{option}")
    if seconds <= 0:
        raise ValueError(f"{where}{option} must be positive, got {value!r}")
    return seconds
