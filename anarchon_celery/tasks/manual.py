"""Run now (a manual run: ``trigger()``, ``manage.py anarchon trigger``, the admin's Run now)
of a Celery entry.

A manual run holds no lease (the store hands each request to one instance, and nothing
takes it over), so its publish is not fenced by one; it carries no run token either (no
worker may finish a scheduled slot with it). Without outcome tracking the manual record
is the publish's outcome. With tracking the message carries ``anarchon_manual``; the
worker that ends the task writes its outcome to the job's shared value
[`OUTCOME_FIELD`][anarchon_celery.tasks.manual.OUTCOME_FIELD] (one per job: one manual run at a
time), and the beat's handler waits for it (up to ``queue_lease``), so the manual record
is the task's outcome.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping
from typing import Any, Protocol

from anarchon import RunContext

logger = logging.getLogger("anarchon.celery")

#: the message header that marks a manual run whose outcome the beat waits for
MANUAL_HEADER = "anarchon_manual"
#: the job's shared value holding the last manual run's outcome (JSON: slot, status, error)
OUTCOME_FIELD = "celery_manual_outcome"
_FIRST_POLL, _MAX_POLL = 0.05, 1.0
_SWAP_TRIES = 8


class Values(Protocol):
    """The compare-and-set store operations (``anarchon.Scheduler`` has them)."""

    def read_value(self, name: str, field: str) -> str | None: ...

    def swap_value(self, name: str, field: str, expected: str | None,
                   value: str) -> bool: ...


class TaskOutcomeError(RuntimeError):
    """The task of a manual run did not succeed (or no worker reported it in time)."""


def manual_headers(ctx: RunContext, track: bool) -> dict[str, Any]:
    """A manual run's headers: the job and its start (``anarchon_slot``), no run token
    (``anarchon_owner``); ``anarchon_manual`` marks it (``1``: the beat waits for the
    worker to report the outcome, ``0``: it does not)."""
    return {"anarchon_job": ctx.name, "anarchon_slot": ctx.slot,
            "anarchon_attempt": ctx.attempt, MANUAL_HEADER: 1 if track else 0}


def manual_of(headers: Mapping[str, Any]) -> tuple[str, int] | None:
    """``(job, slot)`` of a manual run whose outcome is wanted, from a message's headers."""
    if not headers.get(MANUAL_HEADER) or "anarchon_owner" in headers:
        return None
    try:
        return str(headers["anarchon_job"]), int(headers["anarchon_slot"])
    except (KeyError, TypeError, ValueError):
        return None


def report(values: Values, job: str, slot: int, status: str, error: str | None) -> None:
    """Write the outcome of manual run ``(job, slot)`` (worker side)."""
    text = json.dumps({"slot": slot, "status": status, "error": error})
    for _ in range(_SWAP_TRIES):
        current = values.read_value(job, OUTCOME_FIELD)
        if values.swap_value(job, OUTCOME_FIELD, current, text):
            return
    raise RuntimeError(f"the manual outcome of {job!r} kept changing")


def wait_outcome(values: Values, ctx: RunContext, timeout: float) -> None:
    """Return when the worker reported the manual run ``ctx`` a success; raise
    ``TaskOutcomeError`` for another outcome or none within ``timeout`` seconds, and
    [`anarchon.Aborted`][anarchon.Aborted] when the beat stops meanwhile."""
    deadline = time.monotonic() + timeout
    delay = _FIRST_POLL
    while True:
        try:
            raw = values.read_value(ctx.name, OUTCOME_FIELD)
        except Exception as exc:  # the store is down: the next poll tries again
            logger.debug("anarchon_celery: manual outcome of %r not read: %s", ctx.name, exc)
            raw = None
        data = _decode(raw)
        if data is not None and data.get("slot") == ctx.slot:
            status, error = data.get("status"), data.get("error")
            if status == "success":
                return
            raise TaskOutcomeError(f"task {status}" + (f": {error}" if error else ""))
        if time.monotonic() >= deadline:
            raise TaskOutcomeError(
                f"published, but no worker reported its outcome within {timeout:g}s "
                "(anarchon_queue_lease): the task is still queued or running, or the "
                "workers do not call track_outcomes(app)")
        if ctx.signal.wait(delay):
            ctx.signal.raise_if_aborted()
        delay = min(delay * 1.5, _MAX_POLL)


def _decode(raw: str | None) -> dict[str, Any] | None:
    if not raw:
        return None
    try:
        data = json.loads(raw)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


__all__ = ["MANUAL_HEADER", "OUTCOME_FIELD", "TaskOutcomeError", "Values", "manual_headers",
           "manual_of", "report", "wait_outcome"]
