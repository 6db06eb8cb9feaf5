"""Schedule marks stacked on Dramatiq actors: ``@every("5m")``, ``@cron(...)``, ``@at(...)``.

A mark only records what to schedule; nothing is registered until
[`anarchon_dramatiq.register_actors()`][anarchon_dramatiq.register_actors] (or the
``anarchon-dramatiq`` CLI) finds the
marked actors on a broker. Marks work above or below ``@dramatiq.actor``::

    @every("5m", max_attempts=1, queue_name="reports")
    @dramatiq.actor
    def refresh() -> None: ...

Keyword options split three ways: anarchon job options (``jitter``, ``max_late``,
``max_attempts``, ``catch_up``, ``overlap``, ``timezone``, ``offset``, ``history_size``,
``history_ttl``, ``timeout``, ``data``), anarchon-dramatiq options (``name``, ``track``,
``queue_lease``, ``resend``, ``args``, ``kwargs``, ``queue_name``, ``delay``), and Dramatiq
message options, passed to ``actor.send_with_options`` (``max_retries``, ``time_limit``,
``max_age``, ``on_failure`` … — the options the broker's middleware declares, as
Dramatiq's own ``actor()`` checks them). Anything else is a ``TypeError`` naming the
known options; options that cannot work are refused when the mark is made.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, TypeVar

from anarchon.durations import parse_duration
from anarchon.jobs.definition import JOB_OPTIONS, resolve_job
from anarchon.jobs.name_checks import check_job_name

from .errors import check_delay, check_resend

T = TypeVar("T")

#: attribute on the actor's function holding its marks
MARKS_ATTRIBUTE = "__anarchon_dramatiq__"

#: message option names that carry a run (docs/contract.md, *Framework surfaces*); a mark
#: may not set them
RESERVED_OPTIONS = frozenset({"anarchon_job", "anarchon_slot", "anarchon_attempt",
                              "anarchon_owner", "anarchon_data", "anarchon_history_size",
                              "anarchon_history_ttl"})

#: this package's own mark options
MARK_OPTIONS = frozenset({"track", "queue_lease", "resend", "args", "kwargs", "queue_name",
                          "delay"})

#: message options of Dramatiq's stock middleware and brokers (``Results`` and the
#: RabbitMQ broker's ``broker_priority`` included): a mark put below ``@dramatiq.actor``
#: does not know its broker yet; registration checks against the actor's broker
STOCK_MESSAGE_OPTIONS = frozenset({
    "max_age", "max_backoff", "max_retries", "min_backoff", "notify_shutdown", "on_failure",
    "on_retry_exhausted", "on_success", "pipe_ignore", "pipe_target", "retry_when",
    "throws", "time_limit", "store_results", "result_ttl", "broker_priority"})
#: message options read by brokers rather than declared by middleware
BROKER_OPTIONS = frozenset({"broker_priority"})


@dataclass(frozen=True)
class Mark:
    """One schedule of one actor, as declared by a decorator."""

    kind: str
    when: Any
    #: job name; ``None`` means "the actor's name"
    name: str | None
    #: anarchon job options (checked when the mark is made)
    job_options: Mapping[str, Any] = field(default_factory=dict)
    #: ``None`` = the registering side's default
    track: bool | None = None
    #: seconds a tracked message may wait in the queue before a backup re-sends it
    queue_lease: float | None = None
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    #: send to this queue instead of the actor's own
    queue_name: str | None = None
    #: milliseconds, as Dramatiq's ``delay``
    delay: int | None = None
    #: the rest: passed to ``send_with_options`` unchanged
    message_options: Mapping[str, Any] = field(default_factory=dict)
    #: tracked: send the slot again (up to ``max_attempts``) when its outcome has not
    #: arrived within ``queue_lease``; off by default (a re-send may run the actor twice)
    resend: bool = False


def every(interval: Any, *, name: str | None = None, **options: Any) -> Callable[[T], T]:
    """Send the actor every ``interval`` (``"5m"``, seconds, ``timedelta``) on the UTC grid.

    ``name`` defaults to the actor's name. See the module docstring for the options.

    The schedule comes first and ``name`` is keyword-only, unlike
    [`anarchon.every()`][anarchon.jobs.global_api.every] (``every(name, interval)``): a mark
    names the actor it decorates, so the job name is rarely given, as
    ``@dramatiq.actor`` takes its ``actor_name`` by keyword.
    """
    return _marker("every", interval, name, options)


def cron(expr: str, *, name: str | None = None, **options: Any) -> Callable[[T], T]:
    """Send the actor on a cron expression (5 fields, or 6 with seconds first).

    ``timezone=`` (IANA name) decides the wall clock; default UTC.
    """
    return _marker("cron", expr, name, options)


def at(when: Any, *, name: str | None = None, **options: Any) -> Callable[[T], T]:
    """Send the actor once at ``when`` (aware ``datetime``, epoch seconds or ISO-8601)."""
    return _marker("at", when, name, options)


def marks_of(target: Any) -> list[Mark]:
    """The marks on an actor (or on a function not yet turned into one)."""
    fn = getattr(target, "fn", target)
    marks: list[Mark] = list(getattr(fn, MARKS_ATTRIBUTE, ()))
    return marks


def _marker(kind: str, when: Any, name: str | None, options: dict[str, Any]
            ) -> Callable[[T], T]:
    mark = build_mark(kind, when, name, options)

    def decorate(target: T) -> T:
        fn = getattr(target, "fn", target)  # a dramatiq Actor keeps its function in .fn
        if not callable(fn):
            raise TypeError(f"anarchon_dramatiq.{kind}() decorates a Dramatiq actor or its "
                            f"function, got {target!r}")
        broker = getattr(target, "broker", None)
        check_message_options(mark, getattr(broker, "actor_options", None),
                              getattr(fn, "__name__", repr(fn)))
        existing: list[Mark] = list(getattr(fn, MARKS_ATTRIBUTE, ()))
        check_names([*existing, mark], str(getattr(target, "actor_name", None)
                                           or getattr(fn, "__name__", repr(fn))))
        setattr(fn, MARKS_ATTRIBUTE, [*existing, mark])
        return target

    return decorate


def build_mark(kind: str, when: Any, name: str | None, options: Mapping[str, Any]) -> Mark:
    """Split and check a decorator's options (raises ``TypeError``/``ValueError`` early)."""
    if when is None:
        raise TypeError(f"anarchon_dramatiq.{kind}() needs a schedule as first argument")
    if name is not None:
        check_job_name(name)
    options = dict(options)
    job_options = {k: options.pop(k) for k in list(options) if k in JOB_OPTIONS}
    if "priority" in options:
        raise TypeError(f"anarchon_dramatiq.{kind}(): priority is not a message option; "
                        "Dramatiq takes it from the actor: @dramatiq.actor(priority=...) "
                        "(RabbitMQ's per-message priority is broker_priority=)")
    track = options.pop("track", None)
    if track is not None and not isinstance(track, bool):
        raise TypeError(f"track must be a bool, got {track!r}")
    resend = options.pop("resend", False)
    if not isinstance(resend, bool):
        raise TypeError(f"resend must be a bool, got {resend!r}")
    queue_lease = options.pop("queue_lease", None)
    lease_seconds = (None if queue_lease is None
                     else parse_duration(queue_lease, option="queue_lease"))
    if lease_seconds is not None and lease_seconds <= 0:
        raise ValueError(f"queue_lease must be positive, got {queue_lease!r}")
    args = options.pop("args", ())
    if not isinstance(args, (tuple, list)):
        raise TypeError(f"args must be a tuple or list, got {type(args).__name__}")
    kwargs = options.pop("kwargs", None) or {}
    if not isinstance(kwargs, Mapping):
        raise TypeError(f"kwargs must be a dict, got {type(kwargs).__name__}")
    queue_name = options.pop("queue_name", None)
    if queue_name is not None and not isinstance(queue_name, str):
        raise TypeError(f"queue_name must be a str, got {queue_name!r}")
    delay = _delay_ms(options.pop("delay", None))
    reserved = RESERVED_OPTIONS & set(options)
    if reserved:
        raise TypeError(f"options {sorted(reserved)} are set by anarchon_dramatiq itself")
    # Check schedule and anarchon options now, against default scheduler options.
    resolve_job(kind, name or "<actor>", when, job_options)
    where = f"anarchon_dramatiq.{kind}()"
    if track:  # known tracked now; a default track= is checked again on registration
        check_resend(where, resend, job_options.get("max_attempts"))
        check_delay(where, delay, lease_seconds)
    elif resend and track is False:
        raise TypeError(f"{where}: resend=True only applies to tracked marks (track=True)")
    return Mark(kind, when, name, job_options, track, lease_seconds, tuple(args),
                dict(kwargs), queue_name, delay, options, resend)


def check_message_options(mark: Mark, known: Any, where: str) -> None:
    """Refuse message options the broker's middleware does not declare (``known``: the
    broker's ``actor_options``; ``None``: not known yet, the stock set is used)."""
    allowed = STOCK_MESSAGE_OPTIONS if known is None else {*known, *BROKER_OPTIONS}
    unknown = sorted(set(mark.message_options) - allowed)
    if unknown:
        raise TypeError(
            f"anarchon_dramatiq.{mark.kind}() on {where}: unknown option(s) {unknown}; "
            f"known options: job {sorted(JOB_OPTIONS)}, mark {sorted(MARK_OPTIONS)}, "
            f"message {sorted(allowed)} (a message option of your own middleware must be "
            f"declared by it: Middleware.actor_options)")


def check_names(marks: list[Mark], actor: str) -> None:
    """One job per name: at most one mark of an actor may go without ``name=``."""
    anonymous = [m for m in marks if m.name is None]
    if len(anonymous) > 1:
        raise ValueError(f"actor {actor!r} has {len(anonymous)} marks without name=; each "
                         f"mark is a job, named after the actor unless name= is given: add "
                         f"name='...' to all but one, e.g. "
                         f"@{anonymous[-1].kind}(..., name='{actor}-2')")
    named = [m.name for m in marks if m.name is not None]
    for name in sorted({n for n in named if named.count(n) > 1}):
        raise ValueError(f"actor {actor!r} has two marks named {name!r}; job names are "
                         "unique: give each mark its own name=")


def _delay_ms(delay: Any) -> int | None:
    if delay is None:
        return None
    if isinstance(delay, bool):
        raise TypeError(f"delay must be milliseconds (int) or a timedelta, got {delay!r}")
    if isinstance(delay, timedelta):
        return int(delay.total_seconds() * 1000)
    if isinstance(delay, int):
        if delay < 0:
            raise ValueError(f"delay must not be negative, got {delay!r}")
        return delay
    raise TypeError(f"delay must be milliseconds (int) or a timedelta, got {delay!r}")

