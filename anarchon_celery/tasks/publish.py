"""The job handler of one beat entry: the slot winner publishes the task.

[`Publisher`][anarchon_celery.tasks.publish.Publisher] is the Celery side of the core's
hand-off ([`anarchon.handoff.sender.Handoff`][anarchon.handoff.sender.Handoff]: headers,
the lease check before each try, retries until ``max_late``, the outcome watch): it
builds the publish and sends it once; each publish goes through beat's own
``apply_entry`` (``PublishCall``).
"""

from __future__ import annotations

import logging
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from types import SimpleNamespace
from typing import Any, Final

from anarchon import Aborted, AsyncScheduler, RunContext
from anarchon.handoff.outcomes import OutcomeWatch
from anarchon.handoff.sender import Handoff
from anarchon_celery.tasks.manual import Values, manual_headers, wait_outcome

logger = logging.getLogger("anarchon.celery")
beat_logger = logging.getLogger("celery.beat")

_TASK_ID_NAMESPACE = uuid.UUID("6f1c3b1e-6a55-4c4f-9a8e-3d1c2b7a0a11")


def task_id_for(job: str, slot: int, attempt: int) -> str:
    """The task id anarchon_celery gives the message of one attempt (deterministic)."""
    return str(uuid.uuid5(_TASK_ID_NAMESPACE, f"{job}\x00{slot}\x00{attempt}"))


def _evaluate(value: Any) -> Any:
    from celery.beat import BeatLazyFunc

    return value() if isinstance(value, BeatLazyFunc) else value


@dataclass(frozen=True)
class Publish:
    """One publish of an entry: its ``anarchon_*`` headers, its publish options and, once
    prepared for a try, its arguments (lazy ones evaluated)."""

    headers: Mapping[str, Any]
    options: Mapping[str, Any]
    args: list[Any] | None = None
    kwargs: dict[str, Any] | None = None


class Publisher(Handoff[Publish]):
    """Publishes one entry's task for the slot this instance won.

    With outcome tracking the run is detached (``ctx.detach(queue_lease)``): the worker
    finishes it. A failed publish is retried with backoff while the slot is within
    ``max_late``; then the run is recorded as a failure (never silently lost).

    Right before each send the lease is checked (``engine``: the core
    [`anarchon.AsyncScheduler`][anarchon.AsyncScheduler]): a beat that was paused past its lease
    publishes nothing, since a backup may already have published the next attempt.
    """

    logger = logger
    verb = "publish"

    def __init__(self, app: Any, entry: Any, publish_options: Mapping[str, Any], *,
                 track: bool, queue_lease: float, max_late: float,
                 engine: AsyncScheduler | None = None,
                 lease: float = 30.0, heartbeat: float = 5.0,
                 values: Values | None = None, beat: Any = None,
                 watch: OutcomeWatch | None = None) -> None:
        super().__init__(track=track, queue_lease=queue_lease, max_late=max_late,
                         engine=engine, margin=(min(heartbeat, lease / 4), 2 * lease),
                         watch=watch)
        self.app = app
        #: the anarchon beat scheduler whose ``apply_entry`` each publish goes through
        self.beat = beat
        self.entry = entry
        self.publish_options = dict(publish_options)
        self.lease = lease
        self.heartbeat = heartbeat
        #: where a tracked manual run's outcome arrives (``anarchon_celery.tasks.manual``)
        self.values = values

    def headers(self, ctx: RunContext) -> dict[str, Any]:
        """The ``anarchon_*`` headers of this attempt (detaching it when tracking); a
        manual run's say whether the beat waits for its outcome."""
        if ctx.manual:
            return manual_headers(ctx, self.track and self.values is not None)
        return super().headers(ctx)

    def message(self, ctx: RunContext, headers: dict[str, Any]) -> Publish:
        return Publish(headers, self.publish_options)

    def prepare(self, ctx: RunContext, message: Publish) -> Publish:
        """The entry's arguments, lazy ones (``BeatLazyFunc``) evaluated for this try:
        before the lease check, which then comes right before the publish."""
        args, kwargs = entry_arguments(self.entry)
        return replace(message, args=args, kwargs=kwargs)

    def send(self, ctx: RunContext, message: Publish) -> Any:
        """Send the task once; raises what the broker raised."""
        logger.debug("beat entry %r slot %s attempt %d: sending %s", ctx.name, ctx.slot,
                     ctx.attempt, self.entry.task)
        return publish_task(self.app, self.entry.task, message.args or [],
                            message.kwargs or {}, message.options, message.headers,
                            task_id_for(ctx.name, ctx.slot, ctx.attempt))

    def dispatch(self, ctx: RunContext, message: Publish) -> Any:
        try:  # a beat paused past its lease neither publishes nor says it does
            self.fence(ctx)
        except Aborted as exc:
            self.refused(ctx, exc)
            raise
        call = PublishCall(self, ctx, message.headers)
        if self.beat is not None:
            # beat's own apply_entry: it logs "Sending due task" and hooks that wrap it
            # (Sentry Crons' check-ins) see each publish; the beat's apply_async runs it
            self.beat.apply_entry(call)
            if not call.ran:
                raise RuntimeError(f"beat entry {ctx.name!r}: the beat's apply_entry did "
                                   "not call apply_async; nothing was published")
        else:
            beat_logger.info("Scheduler: Sending due task %s (%s)", ctx.name,
                             self.entry.task)
            call.run()
        if call.error is not None:
            raise call.error
        return call.result

    def sent(self, ctx: RunContext, result: Any) -> None:
        if ctx.manual and self.values is not None and self.track:
            wait_outcome(self.values, ctx, self.queue_lease)

    def describe(self, ctx: RunContext) -> str:
        return f"beat entry {ctx.name!r}"

    def refused(self, ctx: RunContext, exc: Aborted) -> None:
        logger.warning("beat entry %r slot %s attempt %d: not published, this beat no "
                       "longer holds the slot (%s)", ctx.name, ctx.slot, ctx.attempt,
                       ctx.signal.reason or "lease not confirmed")


class BeatCall(ABC):
    """A publish handed to beat's ``apply_entry``: the anarchon beat's ``apply_async``
    calls its ``run()`` instead of publishing the entry itself."""

    @abstractmethod
    def run(self) -> Any:
        """Publish; what ``apply_async`` returns."""


class PublishCall(BeatCall):
    """One publish of an entry as the ``ScheduleEntry`` beat's ``apply_entry`` is given
    (``name``, ``task``, ``schedule``, ``args``, ``kwargs``, ``options``: a copy of the
    publish options, which hooks may change, e.g. add headers); the anarchon beat's
    ``apply_async`` calls `run()`, which publishes with retries and keeps the result or
    the error (``apply_entry`` would only log it)."""

    def __init__(self, publisher: Publisher, ctx: RunContext,
                 anarchon_headers: Mapping[str, Any]) -> None:
        entry = publisher.entry
        self.app = publisher.app
        self.name = ctx.name
        self.task = entry.task
        self.schedule = getattr(entry, "schedule", None)
        self.args = entry.args
        self.kwargs = entry.kwargs
        self.options = dict(publisher.publish_options)
        self.last_run_at = getattr(entry, "last_run_at", None)
        self.total_run_count = getattr(entry, "total_run_count", 0)
        self.ran = False
        self.result: Any = None
        self.error: BaseException | None = None
        self._publisher = publisher
        self._ctx = ctx
        self._headers = dict(anarchon_headers)

    def run(self) -> Any:
        """Publish (once; retried within ``max_late``); never raises."""
        self.ran = True
        try:
            self.result = self._publisher.deliver(self._ctx,
                                                  Publish(self._headers, self.options))
        except BaseException as exc:  # kept for the run; apply_entry must not swallow it
            self.error = exc
            return NOT_SENT
        return self.result


#: what ``apply_async`` returns for a publish that failed: Celery's ``apply_entry`` reads
#: the result's ``id`` (at DEBUG) once ``apply_async`` returned
NOT_SENT: Final = SimpleNamespace(id=None)


def entry_arguments(entry: Any) -> tuple[list[Any], dict[str, Any]]:
    """``entry``'s ``args`` and ``kwargs`` as stock beat publishes them (each
    ``BeatLazyFunc`` called)."""
    return ([_evaluate(v) for v in (entry.args or ())],
            {k: _evaluate(v) for k, v in (entry.kwargs or {}).items()})


def publish_task(app: Any, task_name: str, args: list[Any], kwargs: dict[str, Any],
                 publish_options: Mapping[str, Any], anarchon_headers: Mapping[str, Any],
                 task_id: str) -> Any:
    """Publish task ``task_name`` as stock beat does (its options and headers, and the
    ``anarchon_*`` headers); raises what the broker raised."""
    options = dict(publish_options)
    headers = {**dict(options.pop("headers", None) or {}), **anarchon_headers,
               "celery_beat_task": True}
    options.setdefault("task_id", task_id)
    task = app.tasks.get(task_name)
    if task is not None:
        return task.apply_async(args, kwargs, headers=headers, **options)
    return app.send_task(task_name, args, kwargs, headers=headers, **options)


def send_entry(app: Any, entry: Any, publish_options: Mapping[str, Any],
               anarchon_headers: Mapping[str, Any], task_id: str,
               before: Callable[[], None] | None = None, log: bool = True) -> Any:
    """Publish ``entry``'s task as stock beat does (its options, headers, lazy
    arguments), logging stock beat's line (``log``); ``before`` runs right before the
    send."""
    args, kwargs = entry_arguments(entry)
    if before is not None:
        before()
    if log:  # stock beat's line, word for word (alerts and runbooks grep for it)
        beat_logger.info("Scheduler: Sending due task %s (%s)", entry.name, entry.task)
    return publish_task(app, entry.task, args, kwargs, publish_options, anarchon_headers,
                        task_id)


__all__ = ["BeatCall", "Publish", "PublishCall", "Publisher", "entry_arguments", "publish_task",
           "send_entry", "task_id_for"]
