"""Job and scheduler options: converted and checked once, when they are given."""

from __future__ import annotations

import inspect
import logging
import os
import socket
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from ..backends.base import LEASE_ONLY_OPTIONS as LEASE_ONLY_OPTIONS
from ..durations import parse_duration, to_ms
from ..schedules.custom import build_custom
from ..schedules.kinds import (
    AtSchedule,
    CronSchedule,
    EverySchedule,
    Schedule,
    load_timezone,
    ms_to_datetime,
    parse_at,
)

Handler = Callable[..., Any]
NO_DATA: Any = object()  # a level that gave no ``data``
Overlap = Literal["skip", "allow"]

if TYPE_CHECKING:
    from ..backends.base import Backend

logger = logging.getLogger("anarchon")

#: the options of each schedule kind beyond the common ones (``at`` takes no ``overlap``)
KIND_ONLY_OPTIONS: dict[str, str] = {"offset": "every", "timezone": "cron"}

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
#: the upper bounds checked at registration (docs/options.md), so that the store never
#: refuses a value the engine accepted: counts, and every duration (10 years)
MAX_ATTEMPTS = 1000
MAX_HISTORY_SIZE = 100_000
MAX_DURATION = 10 * 365 * 86_400.0
_COUNT_BOUNDS = {"max_attempts": MAX_ATTEMPTS, "history_size": MAX_HISTORY_SIZE}
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
        """Check and convert scheduler options (no backend: see
        ``resolve_scheduler_options()``)."""
        unknown = set(options) - SCHEDULER_OPTIONS
        if unknown:
            raise TypeError(f"unknown scheduler option(s) {sorted(unknown)}; "
                            f"known options: {sorted(SCHEDULER_OPTIONS)}")
        lease = _bounded(_positive(options.get("lease", 30.0), "lease", None), "lease")
        heartbeat = _bounded(_positive(options.get("heartbeat", 5.0), "heartbeat", None),
                             "heartbeat")
        check_heartbeat(heartbeat, lease, hint=True)
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
    #: a dynamic job's stored ``params`` (``ctx.params``); ``None`` for code jobs
    params: Any = None
    #: the framework layer that declared it (``anarchon.backends.frameworks``); ``None``:
    #: a plain job
    framework: str | None = None

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


def warn_if_past(job: Job, now_ms: int, catches_up: bool) -> None:
    """Log one WARNING at start for an ``at()`` job whose time has passed and that
    catch-up cannot run (outside ``catch_up``, or no lease backend): it never runs here."""
    if not isinstance(job.schedule, AtSchedule) or job.schedule.slot_ms > now_ms:
        return
    slot = job.schedule.slot_ms
    if catches_up and slot > now_ms - to_ms(job.catch_up):
        return  # catch-up runs it once, cluster-wide
    why = "outside catch_up" if catches_up else "this store does not catch up"
    logger.warning("job %r: its at() time %s is in the past (%s); it does not run",
                   job.name, ms_to_datetime(slot).isoformat(), why)


def check_heartbeat(heartbeat: float, lease: float, *, hint: bool = False) -> None:
    """The rule ``heartbeat < lease`` (seconds): a lease must survive one late beat."""
    if heartbeat >= lease:
        example = "; e.g. lease='30s', heartbeat='5s'" if hint else ""
        raise ValueError(f"heartbeat ({heartbeat:g}s) must be shorter than lease "
                         f"({lease:g}s){example}")


def resolve_scheduler_options(options: Mapping[str, Any],
                              backend: Backend | None = None) -> SchedulerOptions:
    """Check scheduler-wide ``options`` (and the defaults they set for every job) against
    the options ``backend`` refuses
    ([`Backend.refused_options()`][anarchon.backends.base.Backend.refused_options]), then convert
    them.
    """
    refused = backend.refused_options() if backend is not None else {}
    for option in options:
        if option in refused:
            raise TypeError(f"option {option!r} {refused[option]}")
    return SchedulerOptions.build(options)


def resolve_job(kind: str, name: str, when: Any, options: Mapping[str, Any], *,
                handler: Handler | None = None, scheduler: SchedulerOptions | None = None,
                backend: Backend | None = None) -> Job:
    """The one check of a job, used by every layer: the scheduler, the module-level
    decorators, Django declarations and system checks, Dramatiq actor marks.

    Checks ``options`` for a ``kind`` job (which options apply to which kind, their
    types and values), the options ``backend`` refuses and its own limits
    ([`Backend.check_job()`][anarchon.backends.base.Backend.check_job]), and resolves them against
    ``scheduler``'s defaults.
    Without a ``backend`` (checked before one is configured) every option a lease
    backend takes is accepted; without ``scheduler`` the built-in defaults apply.
    Raises ``TypeError``/``ValueError`` naming the job and what was wrong.
    """
    job = build_job(kind, name, when, _noop if handler is None else handler, options,
                    scheduler or SchedulerOptions.build({}),
                    refused=backend.refused_options() if backend is not None else {})
    if backend is not None:
        backend.check_job(name, job.jitter, job.max_late)
    return job


def applies(option: str, kind: str) -> bool:
    """Whether a ``kind`` job takes ``option`` (``offset``: every; ``timezone``: cron;
    ``overlap``: not at, which runs once)."""
    only = KIND_ONLY_OPTIONS.get(option)
    if only is not None:
        return only == kind
    return not (option == "overlap" and kind == "at")


def build_schedule(kind: str, name: str, when: Any, options: Mapping[str, Any]) -> Schedule:
    """The schedule of a new job; ``options`` are already converted."""
    if kind == "every":
        if isinstance(when, bool) or (not isinstance(when, (int, float, str)) and not hasattr(
            when, "total_seconds"
        )):
            raise TypeError(f"job {name!r}: interval must be a duration (seconds, timedelta "
                            f"or '10s'), got {type(when).__name__}: {when!r}")
        seconds = _bounded(parse_duration(when, option=f"job {name!r}: interval"),
                           f"job {name!r}: interval")
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
    if kind == "custom":
        return build_custom(when, name)
    raise ValueError(f"unknown schedule kind {kind!r}")


def build_job(
    kind: str,
    name: str,
    when: Any,
    handler: Handler,
    options: Mapping[str, Any],
    scheduler: SchedulerOptions,
    *,
    refused: Mapping[str, str] | None = None,
    supports_leases: bool = True,
    backend_name: str = "",
) -> Job:
    """Check ``options`` for a ``kind`` job and resolve them against scheduler defaults;
    ``refused`` maps the options the backend refuses to why. Layers call
    ``resolve_job()``, which also applies the backend's own checks.
    (``supports_leases=False`` with ``backend_name``, the former way to refuse the
    lease-only options, is kept for this release.)"""
    refused = dict(refused or {})
    if not supports_leases:
        refused.update({option: f"needs a lease backend; backend {backend_name} only picks "
                        "one winner per slot" for option in LEASE_ONLY_OPTIONS})
    if not callable(handler):
        raise TypeError(f"job {name!r}: handler must be callable, got {handler!r}")
    unknown = set(options) - JOB_OPTIONS
    if unknown:
        raise TypeError(f"job {name!r}: unknown option(s) {sorted(unknown)}; "
                        f"known options: {sorted(JOB_OPTIONS)}")
    for option in options:
        if not applies(option, kind):
            if option == "overlap":
                raise TypeError(f"job {name!r}: at() runs once and takes no 'overlap' option")
            raise TypeError(f"job {name!r}: {option!r} only applies to "
                            f"{KIND_ONLY_OPTIONS[option]}() jobs")
    for option in options:
        if option in refused:
            raise TypeError(f"job {name!r}: option {option!r} {refused[option]}")
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
        catch_up=0.0 if "catch_up" in refused else converted["catch_up"],
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
            out[key] = _bounded(parse_duration(value, option=f"{where}{key}"), f"{where}{key}")
        elif key in ("timeout", "history_ttl"):
            out[key] = None if value is None else _bounded(_positive(value, key, job),
                                                           f"{where}{key}")
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
            if value > _COUNT_BOUNDS[key]:
                raise ValueError(f"{where}{key} must be at most {_COUNT_BOUNDS[key]}, got "
                                 f"{value!r}")
            out[key] = value
        elif key == "timezone":
            out[key] = load_timezone(value, job=job).key
        else:  # data: any value; dicts merge, callables are called per run
            out[key] = value
    return out


def _noop(ctx: Any) -> None:
    return None


def _bounded(seconds: float, what: str) -> float:
    if seconds > MAX_DURATION:
        raise ValueError(f"{what} must be at most 10 years ({MAX_DURATION:.0f}s), got "
                         f"{seconds:g}s")
    return seconds


def _positive(value: Any, option: str, job: str | None) -> float:
    where = f"job {job!r}: " if job else ""
    seconds = parse_duration(value, option=f"{where}{option}")
    if seconds <= 0:
        raise ValueError(f"{where}{option} must be positive, got {value!r}")
    return seconds


def resolve_instance_id(instance_id: object) -> str:
    """The instance id a scheduler records with each attempt: the one given (a non-empty
    ``str``) or ``host:pid:random``, unique per process."""
    if instance_id is None:
        return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
    if not isinstance(instance_id, str):
        raise TypeError(f"instance_id must be a str, got {type(instance_id).__name__}")
    if instance_id == "":
        raise ValueError("instance_id must not be empty")
    return instance_id
