"""``AnarchonMiddleware``: the real outcome of tracked messages in anarchon's history.

Add it to the workers' broker **before** ``Retries``::

    broker.add_middleware(AnarchonMiddleware("redis://localhost:6379"), before=Retries)

(or [`install_middleware()`][anarchon_dramatiq.middleware.install_middleware]). Why before:
Dramatiq runs ``after_*`` hooks in reverse
order of the middleware list (``Broker.emit_after``). A middleware placed before
``Retries`` therefore sees ``after_process_message`` *after* ``Retries`` has decided:
``message.failed`` is then True when no retry follows (retries exhausted, ``throws``),
and False when a retry was enqueued. Placed after ``Retries`` it would run first and
could not tell a retry from a final failure.

What it records, keyed by the message's slot (``anarchon_job/slot/attempt/owner``):

* ``before_process_message``: the worker starts the run; the lease is renewed and kept
  alive by heartbeats while the message executes. If the attempt was replaced (a backup
  scheduler re-sent the slot after the lease expired), the message is skipped with
  ``SkipMessage``: only the newest attempt runs.
* ``after_process_message``: success; on an exception a final failure, unless a retry
  follows — then the run stays ``running`` (the lease keeps being renewed here until the
  retry is processed), its record noting ``retrying: <exception>`` until the outcome
  replaces it, and nothing final is written.
* ``after_skip_message``: a message skipped by another middleware (e.g. ``AgeLimit``)
  is recorded as a failure naming the skip.

History is trimmed on finish to the mark's ``history_size``/``history_ttl`` when the
message carries them (``anarchon_history_size``/``anarchon_history_ttl``), else to the
middleware's own.

Messages without anarchon options (sent by anything else) are ignored.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any, TypeAlias

from dramatiq import Broker, Middleware
from dramatiq.broker import MessageProxy
from dramatiq.middleware import Retries, SkipMessage

from anarchon import AsyncTracker, Backend, RunToken, Tracker, from_url
from anarchon.handoff import PerProcess

logger = logging.getLogger("anarchon.dramatiq")

BackendSource: TypeAlias = "str | Backend | Callable[[], Backend]"


class AnarchonMiddleware(Middleware):
    """Records tracked messages' outcomes through an [`anarchon.Tracker`][anarchon.Tracker].

    ``backend``: the schedulers' store, as a URL (``redis://…?prefix=…``), a backend
    object, or a callable building one. The connection is opened lazily in each worker
    process (after Dramatiq forks). ``lease``/``heartbeat`` apply while a message runs:
    give the schedulers' values. ``history_size``/``history_ttl`` bound history on finish.
    """

    def __init__(self, backend: BackendSource, *, lease: Any = 30, heartbeat: Any = 5,
                 history_size: int = 100, history_ttl: Any = None) -> None:
        if not (isinstance(backend, (str, Backend)) or callable(backend)):
            raise TypeError(f"backend must be a URL, an anarchon Backend or a callable "
                            f"returning one, got {backend!r}")
        self._source = backend
        self._options: dict[str, Any] = dict(lease=lease, heartbeat=heartbeat,
                                             history_size=history_size,
                                             history_ttl=history_ttl)
        AsyncTracker(_placeholder_backend(), **self._options)  # check options (no I/O)
        self._lock = threading.Lock()
        self._tracker = PerProcess(lambda: Tracker(self._build_backend(), **self._options),
                                   Tracker.close)
        #: message ids skipped by us because their attempt was replaced
        self._replaced: set[str] = set()

    # -- the tracker, one per process ------------------------------------------------------

    @property
    def tracker(self) -> Tracker:
        """This process's tracker (created on first use, again after a fork)."""
        return self._tracker.get()

    def _build_backend(self) -> Backend:
        source = self._source
        if isinstance(source, str):
            return from_url(source)
        if isinstance(source, Backend):
            return source
        backend = source()
        if not isinstance(backend, Backend):
            raise TypeError(f"backend factory returned {backend!r}, not an anarchon Backend")
        return backend

    def close(self) -> None:
        """Stop renewing and close this process's store connection."""
        self._tracker.close()

    # -- Dramatiq hooks ---------------------------------------------------------------------

    def before_process_message(self, broker: Broker, message: MessageProxy) -> None:
        token = RunToken.from_headers(message.options)
        if token is None:
            return
        if not self.tracker.begin(token):
            logger.warning("message %s: job %r slot %s attempt %d was replaced by a newer "
                           "attempt; skipping it", message.message_id, token.name,
                           token.slot, token.attempt)
            with self._lock:
                self._replaced.add(message.message_id)
            raise SkipMessage(f"anarchon attempt {token.attempt} of {token.name!r} slot "
                              f"{token.slot} was replaced")

    def after_process_message(self, broker: Broker, message: MessageProxy, *,
                              result: Any = None, exception: BaseException | None = None
                              ) -> None:
        token = RunToken.from_headers(message.options)
        if token is None:
            return
        if exception is None:
            self._end(token, "success", None, message.options)
        elif message.failed or not _has_retries(broker):
            self._end(token, "failure", _describe(exception), message.options)
        else:
            logger.info("job %r slot %s attempt %d: %s; a retry follows (retry %s)",
                        token.name, token.slot, token.attempt, _describe(exception),
                        message.options.get("retries"))
            self._note(token, f"retrying: {_describe(exception)}")

    def after_skip_message(self, broker: Broker, message: MessageProxy) -> None:
        token = RunToken.from_headers(message.options)
        if token is None:
            return
        with self._lock:
            if message.message_id in self._replaced:
                self._replaced.discard(message.message_id)
                return
        self._end(token, "failure", "message skipped by a middleware (e.g. AgeLimit max_age)",
                  message.options)

    def after_worker_shutdown(self, broker: Broker, worker: Any) -> None:
        self.close()

    def _note(self, token: RunToken, text: str) -> None:
        try:
            self.tracker.note(token, text)
        except Exception:  # a note is informative: never fail the message for it
            logger.exception("job %r slot %s attempt %d: could not record a note",
                             token.name, token.slot, token.attempt)

    def _end(self, token: RunToken, status: Any, error: str | None,
             options: Mapping[str, Any]) -> None:
        size, ttl = _history_options(options)
        if not self.tracker.end(token, status, error, history_size=size, history_ttl=ttl):
            logger.warning("job %r slot %s attempt %d: outcome %s not recorded (the attempt "
                           "was replaced)", token.name, token.slot, token.attempt, status)


def install_middleware(broker: Broker, backend: BackendSource, **options: Any
                       ) -> AnarchonMiddleware:
    """Add an [`AnarchonMiddleware`][anarchon_dramatiq.middleware.AnarchonMiddleware] to ``broker``
    before ``Retries`` (or last if the
    broker has no ``Retries``) and return it. ``options`` as for the middleware."""
    middleware = AnarchonMiddleware(backend, **options)
    if _has_retries(broker):
        broker.add_middleware(middleware, before=Retries)
    else:
        broker.add_middleware(middleware)
    return middleware


def _history_options(options: Mapping[str, Any]) -> tuple[int | None, float | None]:
    """The mark's ``history_size``/``history_ttl``, carried by the message (if valid)."""
    size, ttl = options.get("anarchon_history_size"), options.get("anarchon_history_ttl")
    valid_size = size if isinstance(size, int) and not isinstance(size, bool) and size > 0 \
        else None
    valid_ttl = float(ttl) if isinstance(ttl, (int, float)) and ttl > 0 else None
    return valid_size, valid_ttl


def _has_retries(broker: Broker) -> bool:
    return any(isinstance(m, Retries) for m in broker.middleware)


def _describe(error: BaseException) -> str:
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def _placeholder_backend() -> Backend:
    from anarchon import SqliteBackend

    return SqliteBackend(database=":memory:")
