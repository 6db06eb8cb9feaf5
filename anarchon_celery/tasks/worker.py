"""Worker side: record each published slot's real outcome in anarchon's history.

Call [`track_outcomes()`][anarchon_celery.tasks.worker.track_outcomes] once in the module
that defines the Celery app (workers and beats import it). Beats then leave each run open
when they publish (``ctx.detach``), and workers report ``running`` -> ``success`` /
``failure`` / ``interrupted`` (revoked, expired, rejected, ignored). A retried task stays
``running`` (its lease renewed) until the retry ends, its record noting ``retrying:
<exception>`` meanwhile. A worker killed mid-task, or under prefork the pool process
running the task (Celery reports ``WorkerLostError``), stops renewing the run's lease: a
beat takes the slot over (attempt 2, attempt 1 ``interrupted``) once the lease expires.

Under prefork each pool process opens its own store connections on first use (keyed by
pid, reset after every fork): nothing opened in the parent is used in a child.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Mapping
from typing import Any

from anarchon import RunToken, Scheduler, Tracker
from anarchon.handoff import PerProcess
from anarchon.history import RunStatus
from anarchon_celery.beat.config import Settings, resolve
from anarchon_celery.tasks.manual import MANUAL_HEADER, manual_of, report

logger = logging.getLogger("anarchon.celery")

_HEADER_KEYS = ("anarchon_job", "anarchon_slot", "anarchon_attempt", "anarchon_owner")


class OutcomeRecorder:
    """One app's tracking: a [`anarchon.Tracker`][anarchon.Tracker] per process, opened after
    fork."""

    def __init__(self, app: Any, settings: Settings | None = None) -> None:
        self.app = app
        self._settings = settings
        self._tracker = PerProcess(self._build_tracker, Tracker.close)
        #: reads and writes manual runs' outcomes (built on first use, per process)
        self._reader = PerProcess(lambda: Scheduler(self.settings.build_backend()),
                                  Scheduler.close)

    @property
    def settings(self) -> Settings:
        if self._settings is None:
            self._settings = resolve(self.app)
        return self._settings

    def after_fork(self) -> None:
        """In a forked child: forget the parent's tracker (its thread and sockets belong
        to the parent; closing them here would break the parent's) and its lock."""
        self._tracker.after_fork()
        self._reader.after_fork()

    def tracker(self) -> Tracker:
        """This process's tracker (a forked child builds its own connections)."""
        return self._tracker.get()

    def _build_tracker(self) -> Tracker:
        options = self.settings.scheduler_options
        tracker_options = {k: options[k] for k in ("lease", "heartbeat") if k in options}
        return Tracker(self.settings.build_backend(), **tracker_options)

    def begin(self, token: RunToken) -> None:
        try:
            if not self.tracker().begin(token):
                logger.warning("anarchon: %s slot %s attempt %d was replaced by a later "
                               "attempt; running it anyway (at-least-once)", token.name,
                               token.slot, token.attempt)
        except Exception:
            logger.exception("anarchon: could not record the start of %s slot %s",
                             token.name, token.slot)

    def end(self, token: RunToken, status: RunStatus, error: str | None = None) -> None:
        try:
            self.tracker().end(token, status, error)
        except Exception:
            logger.exception("anarchon: could not record the outcome of %s slot %s",
                             token.name, token.slot)

    def note(self, token: RunToken, text: str) -> None:
        """Show ``text`` on the still-running run in history (the outcome replaces it)."""
        try:
            self.tracker().note(token, text)
        except Exception:
            logger.exception("anarchon: could not record a note on %s slot %s",
                             token.name, token.slot)

    def manual_end(self, job: str, slot: int, status: RunStatus,
                   error: str | None = None) -> None:
        """Report the outcome of a manual run (Run now) to the beat waiting for it."""
        try:
            report(self._values(), job, slot, status, error)
        except Exception:
            logger.exception("anarchon: could not report the outcome of the manual run of "
                             "%s", job)

    def _values(self) -> Scheduler:
        return self._reader.get()

    def close(self) -> None:
        self._tracker.close()
        self._reader.close()


def _anarchon_headers(request: Any) -> dict[str, Any]:
    """The ``anarchon_*`` headers of a task request (its ``headers``, else its fields)."""
    if request is None:
        return {}
    headers = getattr(request, "headers", None)
    found: dict[str, Any] = dict(headers) if isinstance(headers, Mapping) else {}
    if "anarchon_job" not in found:
        getter = getattr(request, "get", None)
        for key in (*_HEADER_KEYS, MANUAL_HEADER):
            value = getter(key) if callable(getter) else getattr(request, key, None)
            if value is not None:
                found[key] = value
    return found


def token_from_request(request: Any) -> RunToken | None:
    """The run token carried by a task request's headers, if any."""
    return RunToken.from_headers(_anarchon_headers(request))


def _end(recorder: OutcomeRecorder | None, request: Any, status: RunStatus,
         error: str | None = None) -> None:
    """Record the outcome of the run ``request`` carries: a slot's (its token) or a
    tracked manual run's (reported to the beat waiting for it)."""
    if recorder is None:
        return
    headers = _anarchon_headers(request)
    token = RunToken.from_headers(headers)
    if token is not None:
        recorder.end(token, status, error)
        return
    manual = manual_of(headers)
    if manual is not None:
        recorder.manual_end(*manual, status, error)


_recorders: dict[int, OutcomeRecorder] = {}
_connected = False
_connect_lock = threading.Lock()


def _recorder(task: Any) -> OutcomeRecorder | None:
    app = getattr(task, "app", None) or getattr(task, "_app", None)
    return _recorders.get(id(app)) if app is not None else None


def _on_prerun(sender: Any = None, task: Any = None, **_: Any) -> None:
    task = task or sender
    recorder, token = _recorder(task), token_from_request(getattr(task, "request", None))
    if recorder is not None and token is not None:
        recorder.begin(token)


def _on_success(sender: Any = None, **_: Any) -> None:
    _end(_recorder(sender), getattr(sender, "request", None), "success")


def _on_failure(sender: Any = None, exception: BaseException | None = None, **_: Any) -> None:
    request = getattr(sender, "request", None)
    recorder, token = _recorder(sender), token_from_request(request)
    if token is None:  # a manual run (nothing takes it over: its worker's loss is its end)
        _end(recorder, request, "failure",
             _describe(exception) if exception is not None else None)
        return
    if recorder is not None:
        if _worker_lost(exception):
            # a prefork child died mid-task (kill -9, OOM): the task did not fail, its
            # process did. Nothing renews the lease any more, so a beat takes the slot
            # over as the next attempt once it expires (and records this one
            # interrupted), as when a whole worker dies.
            logger.warning("anarchon: %s slot %s attempt %d: the pool process running it "
                           "was lost (%s); a beat takes it over when its lease expires",
                           token.name, token.slot, token.attempt, exception)
            return
        recorder.end(token, "failure", _describe(exception) if exception is not None else None)


def _worker_lost(exception: BaseException | None) -> bool:
    try:
        from billiard.exceptions import WorkerLostError
    except ImportError:  # pragma: no cover - billiard comes with celery
        return False
    return isinstance(exception, WorkerLostError)


def _on_postrun(sender: Any = None, task: Any = None, state: str | None = None,
                **_: Any) -> None:
    # success, failure and retry have their own signals; this covers the rest
    if state in (None, "SUCCESS", "FAILURE", "RETRY"):
        return
    task = task or sender
    _end(_recorder(task), getattr(task, "request", None), "interrupted",
         f"task ended in state {state}")


def _on_revoked(sender: Any = None, request: Any = None, terminated: bool = False,
                expired: bool = False, signum: Any = None, **_: Any) -> None:
    how = ": expired" if expired else f": terminated ({signum})" if terminated else ""
    _end(_recorder(sender), request, "interrupted", f"revoked{how}")


def _on_retry(sender: Any = None, request: Any = None, reason: Any = None, **_: Any) -> None:
    # the run stays "running" (docs/contract.md, *History and events*) and the worker
    # keeps renewing its lease until the retried task ends; its record notes
    # "retrying: <exception>" until the outcome replaces it (a success clears it)
    recorder, token = _recorder(sender), token_from_request(request)
    if recorder is not None and token is not None:
        cause = getattr(reason, "exc", None)  # Retry(exc=...): the exception retried
        text = "retrying: " + _describe(cause if isinstance(cause, BaseException) else reason)
        logger.info("anarchon: %s slot %s attempt %d: %s", token.name, token.slot,
                    token.attempt, text)
        recorder.note(token, text)


def _describe(reason: Any) -> str:
    if isinstance(reason, BaseException):
        return f"{type(reason).__name__}: {reason}"
    return str(reason)


def _after_fork_in_child() -> None:
    for recorder in list(_recorders.values()):
        recorder.after_fork()


def _on_worker_shutdown(**_: Any) -> None:
    for recorder in list(_recorders.values()):
        recorder.close()


def track_outcomes(app: Any, settings: Settings | None = None) -> OutcomeRecorder:
    """Record the outcome of every task a beat published for ``app`` in anarchon.

    Call it where the app is defined, so workers and beats both see it: it sets
    ``app.conf.anarchon_track = True`` (beats then detach each run until a
    worker reports it) and connects the worker signal handlers (idempotent).
    """
    global _connected
    from celery import signals

    app.conf.anarchon_track = True
    with _connect_lock:
        recorder = _recorders.get(id(app))
        if recorder is None:
            recorder = _recorders[id(app)] = OutcomeRecorder(app, settings)
        if not _connected:
            signals.task_prerun.connect(_on_prerun, weak=False)
            signals.task_success.connect(_on_success, weak=False)
            signals.task_failure.connect(_on_failure, weak=False)
            signals.task_postrun.connect(_on_postrun, weak=False)
            signals.task_revoked.connect(_on_revoked, weak=False)
            signals.task_retry.connect(_on_retry, weak=False)
            signals.worker_shutdown.connect(_on_worker_shutdown, weak=False)
            os.register_at_fork(after_in_child=_after_fork_in_child)
            _connected = True
    return recorder


__all__ = ["OutcomeRecorder", "token_from_request", "track_outcomes"]
