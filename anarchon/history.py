"""Attempt records and job descriptions returned by ``history()``, ``last_run()``, ``jobs()``."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, get_args

RunStatus = Literal["running", "success", "failure", "interrupted", "skipped"]
#: why an attempt started (``scheduled`` … ``takeover``), or, on a ``skipped`` record, why
#: its slot was given up (``late``, ``overlap``)
RunReason = Literal["scheduled", "manual", "catch-up", "takeover", "late", "overlap"]
#: every status and every reason a record can have (for filters and choices)
RUN_STATUSES: tuple[str, ...] = get_args(RunStatus)
RUN_REASONS: tuple[str, ...] = get_args(RunReason)


@dataclass(frozen=True)
class RunRecord:
    """One attempt at one slot, as stored; the same from every instance.

    ``error``: a finished attempt's error text (None on success); on a ``running``
    attempt, the latest note a worker left
    ([`anarchon.AsyncTracker.note()`][anarchon.tracking.AsyncTracker.note], e.g.
    ``"retrying: …"``), replaced when the attempt ends.

    A slot given up is recorded once, cluster-wide, on the lease stores: ``status``
    ``"skipped"``, ``attempt`` 0, ``reason`` ``"late"`` (its claims reached the store
    after ``slot + max_late``) or ``"overlap"`` (``overlap="skip"`` and an earlier run
    still held its lease), ``started_at`` = ``finished_at`` = when it was recorded. It
    is bounded by ``history_size``/``history_ttl`` apart from the attempts (skips never push
    runs out of history); ``last_run()`` passes over it.
    """

    name: str
    slot: int
    scheduled_at: datetime
    instance_id: str
    manual: bool
    attempt: int
    reason: RunReason
    status: RunStatus
    started_at: datetime
    finished_at: datetime | None
    duration: float | None
    error: str | None


@dataclass(frozen=True)
class JobInfo:
    """A job as ``jobs()`` reports it.

    ``skipped``: slots of the job this instance gave up since it started, by reason
    (``"late"``: the claim reached the store after ``slot + max_late``, because the store
    or the instance could not keep up; ``"overlap"``; ``"early"``: refused twice as before
    the slot by the store's clock; ``"paused"``; ``"missed"``: its claim was lost in a
    store outage and a newer slot of the job took its place); empty for jobs only other
    instances run.
    """

    name: str
    kind: str
    schedule: str
    next_run: datetime | None
    options: dict[str, Any] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)
    #: paused everywhere (``pause()``); ``next_run`` is then ``None``
    paused: bool = False
    #: where ``schedule`` comes from: ``"code"``, ``"override"`` (``reschedule()``) or
    #: ``"dynamic"`` (``add_job()``)
    source: str = "code"
    #: the version of the job's control record (0: none)
    version: int = 0
    #: a dynamic job's handler name and stored params
    handler: str | None = None
    params: Any = None
    #: the instances that offer the dynamic job's handler (can run it)
    runnable_by: tuple[str, ...] = ()
    #: the framework layer that declared the job: ``"celery"`` (a beat entry, or a
    #: dynamic job of handler ``celery:publish``), ``"dramatiq"`` (a marked actor, or a
    #: dynamic job of a ``dramatiq:<actor>`` handler); ``None`` for a plain job (also one
    #: registered by a version that did not record it). See
    #: ``anarchon.backends.frameworks``.
    framework: str | None = None
    #: when an instance last registered the job (store clock; running instances register
    #: their jobs again every ``anarchon.control.registration_refresh.REGISTER_EVERY``,
    #: 10 min); ``None``
    #: where the store does not keep it (RabbitMQ, NATS) or has not seen a refresh yet
    last_registered: datetime | None = None
    #: declared nowhere in this process and registered by no instance for
    #: ``GONE_AFTER_MS`` (24 h, ``anarchon.backends.trigger_rules``): no instance runs it;
    #: ``Scheduler.forget(name)`` removes its records
    gone: bool = False
