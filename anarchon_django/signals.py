"""Django signals for what a scheduler does, and ``ANARCHON["LISTENERS"]``.

Signals (``from anarchon_django import signals``), sent with ``send_robust`` (a receiver
that raises is logged, never breaks the scheduler) and the keyword arguments ``event``
(``Event``), ``name``, ``slot``, ``attempt``, ``reason``, ``instance_id``
and ``error`` (the exception or ``None``); the sender is the [`Scheduler`][anarchon.Scheduler]:

* ``run_started``, ``run_succeeded``, ``run_failed``, ``run_interrupted``,
  ``run_skipped``, ``run_lost``.

Receivers run in one thread of the scheduler's own, in order, so the engine never waits
for them and they may use the ORM (that thread's connections are closed after each
signal). ``ANARCHON["LISTENERS"]`` maps event types (``start``, ``success``,
``failure``, ``interrupted``, ``skip``, ``lost``, ``error``) to dotted paths of
callables taking the ``Event``; they run the same way.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from django.db import connections
from django.dispatch import Signal
from django.utils.module_loading import import_string

from anarchon import Event, Scheduler
from anarchon_django.settings.conf import SettingsError

logger = logging.getLogger("anarchon_django")

run_started = Signal()
run_succeeded = Signal()
run_failed = Signal()
run_interrupted = Signal()
run_skipped = Signal()
run_lost = Signal()

#: core event type -> signal
SIGNALS: dict[str, Signal] = {
    "start": run_started, "success": run_succeeded, "failure": run_failed,
    "interrupted": run_interrupted, "skip": run_skipped, "lost": run_lost,
}


class Dispatcher:
    """Runs receivers and listeners in one thread of its own, in event order."""

    def __init__(self, scheduler: Scheduler) -> None:
        self.scheduler = scheduler
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="anarchon-signals")

    def submit(self, fn: Callable[[], object]) -> None:
        """Queue ``fn``; it runs after the earlier ones, then the thread's connections
        are closed."""
        def run() -> None:
            try:
                fn()
            except Exception:
                logger.exception("anarchon listener raised")
            finally:
                connections.close_all()

        self._executor.submit(run)

    def send(self, event: Event) -> None:
        """Send the signal of ``event`` (in the dispatcher's thread)."""
        signal = SIGNALS[event.type]

        def send() -> None:
            for receiver, result in signal.send_robust(
                    sender=self.scheduler, event=event, name=event.name, slot=event.slot,
                    attempt=event.attempt, reason=event.reason,
                    instance_id=event.instance_id, error=event.error):
                if isinstance(result, Exception):
                    logger.error("receiver %r of anarchon %s raised %r", receiver,
                                 event.type, result, exc_info=result)

        self.submit(send)


def attach(scheduler: Scheduler, listeners: Mapping[str, Sequence[str]]) -> Dispatcher:
    """Send the signals for ``scheduler``'s events and call the configured listeners."""
    dispatcher = Dispatcher(scheduler)
    for kind in SIGNALS:
        scheduler.on(kind, dispatcher.send)  # type: ignore[arg-type]
    for kind, paths in listeners.items():
        for path in paths:
            try:
                listener = import_string(path)
            except ImportError as exc:
                raise SettingsError(f"ANARCHON['LISTENERS'][{kind!r}]: {path!r} cannot be "
                                    f"imported: {exc}", "anarchon.E002") from exc
            scheduler.on(kind, _queued(dispatcher, listener))  # type: ignore[arg-type]
    return dispatcher


def _queued(dispatcher: Dispatcher, listener: Callable[[Event], Any]
            ) -> Callable[[Event], None]:
    def queue(event: Event) -> None:
        dispatcher.submit(lambda: listener(event))

    return queue
