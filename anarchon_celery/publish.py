"""The job handler of one beat entry: the slot winner publishes the task."""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from anarchon import Aborted, AsyncScheduler, RunContext

from .fence import ensure_lease
from .outcomes import OutcomeWatch

logger = logging.getLogger("anarchon.celery")
beat_logger = logging.getLogger("celery.beat")

_TASK_ID_NAMESPACE = uuid.UUID("6f1c3b1e-6a55-4c4f-9a8e-3d1c2b7a0a11")
_FIRST_RETRY, _MAX_RETRY = 0.5, 10.0


def task_id_for(job: str, slot: int, attempt: int) -> str:
    """The task id anarchon_celery gives the message of one attempt (deterministic)."""
    return str(uuid.uuid5(_TASK_ID_NAMESPACE, f"{job}\x00{slot}\x00{attempt}"))


def _evaluate(value: Any) -> Any:
    from celery.beat import BeatLazyFunc

    return value() if isinstance(value, BeatLazyFunc) else value


class Publisher:
    """Publishes one entry's task for the slot this instance won.

    With outcome tracking the run is detached (``ctx.detach(queue_lease)``): the worker
    finishes it. A failed publish is retried with backoff while the slot is within
    ``max_late``; then the run is recorded as a failure (never silently lost).

    Right before each send the lease is checked (``engine``: the core
    [`anarchon.AsyncScheduler`][anarchon.AsyncScheduler]): a beat that was paused past its lease
    publishes nothing, since a backup may already have published the next attempt.
    """

    def __init__(self, app: Any, entry: Any, publish_options: Mapping[str, Any], *,
                 track: bool, queue_lease: float, max_late: float,
                 engine: AsyncScheduler | None = None,
                 lease: float = 30.0, heartbeat: float = 5.0) -> None:
        self.app = app
        self.entry = entry
        self.publish_options = dict(publish_options)
        self.track = track
        self.queue_lease = queue_lease
        self.max_late = max_late
        self.engine = engine
        self.lease = lease
        self.heartbeat = heartbeat
        #: told of each tracked publish that must not be published again
        self.watch: OutcomeWatch | None = None

    def headers(self, ctx: RunContext) -> dict[str, Any]:
        """The ``anarchon_*`` headers of this attempt (detaching it when tracking)."""
        if self.track:
            return dict(ctx.detach(lease=self.queue_lease).to_headers())
        return {"anarchon_job": ctx.name, "anarchon_slot": ctx.slot,
                "anarchon_attempt": ctx.attempt}

    def __call__(self, ctx: RunContext) -> None:
        anarchon_headers = self.headers(ctx)
        deadline = ctx.slot / 1000 + self.max_late
        delay = _FIRST_RETRY
        while True:
            try:
                self.publish(ctx, anarchon_headers)
                if self.track and self.watch is not None:
                    self.watch.expect(ctx.name, ctx.slot, ctx.attempt, self.queue_lease)
                return
            except Aborted:
                logger.warning("beat entry %r slot %s attempt %d: not published, this beat "
                               "no longer holds the slot (%s)", ctx.name, ctx.slot,
                               ctx.attempt, ctx.signal.reason or "lease not confirmed")
                raise
            except Exception as exc:
                if time.time() + delay > deadline:
                    logger.error("beat entry %r slot %s: publish failed, slot is now past "
                                 "max_late: %s", ctx.name, ctx.slot, exc)
                    raise
                logger.warning("beat entry %r slot %s: publish failed (%s); retrying in "
                               "%.1fs", ctx.name, ctx.slot, exc, delay)
                if ctx.signal.wait(delay):
                    ctx.signal.raise_if_aborted()
                delay = min(delay * 2, _MAX_RETRY)

    def publish(self, ctx: RunContext, anarchon_headers: Mapping[str, Any]) -> Any:
        """Send the task once; raises what the broker raised."""
        def fence() -> None:
            if self.engine is not None:  # the last moment before sending: still ours?
                ensure_lease(self.engine, ctx, margin=min(self.heartbeat, self.lease / 4),
                             wait=2 * self.lease)
            logger.debug("beat entry %r slot %s attempt %d: sending %s", ctx.name,
                         ctx.slot, ctx.attempt, self.entry.task)

        return send_entry(self.app, self.entry, self.publish_options, anarchon_headers,
                          task_id_for(ctx.name, ctx.slot, ctx.attempt), before=fence)


def send_entry(app: Any, entry: Any, publish_options: Mapping[str, Any],
               anarchon_headers: Mapping[str, Any], task_id: str,
               before: Callable[[], None] | None = None) -> Any:
    """Publish ``entry``'s task as stock beat does (its options, headers, lazy
    arguments), logging stock beat's line; ``before`` runs right before the send."""
    options = dict(publish_options)
    headers = {**dict(options.pop("headers", None) or {}), **anarchon_headers,
               "celery_beat_task": True}
    options.setdefault("task_id", task_id)
    args = [_evaluate(v) for v in (entry.args or ())]
    kwargs = {k: _evaluate(v) for k, v in (entry.kwargs or {}).items()}
    task = app.tasks.get(entry.task)
    if before is not None:
        before()
    # stock beat's line, word for word (alerts and runbooks grep for it)
    beat_logger.info("Scheduler: Sending due task %s (%s)", entry.name, entry.task)
    if task is not None:
        return task.apply_async(args, kwargs, headers=headers, **options)
    return app.send_task(entry.task, args, kwargs, headers=headers, **options)


__all__ = ["Publisher", "send_entry", "task_id_for"]
