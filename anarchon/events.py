"""Events emitted by a scheduler and the listeners that receive them."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, get_args

EventType = Literal["start", "success", "failure", "interrupted", "skip", "lost", "error",
                    "change"]
EVENT_TYPES: frozenset[str] = frozenset(get_args(EventType))

logger = logging.getLogger("anarchon")


@dataclass(frozen=True)
class Event:
    """What happened to one job.

    ``reason`` is the run reason for ``start``/``success``/``failure`` (``scheduled``,
    ``manual``, ``catch-up``, ``takeover``); ``taken``/``late``/``overlap``/``early``/
    ``paused``/``missed`` for ``skip``; ``stop``/``timeout``/``lost`` for ``interrupted``; for
    ``change`` (a job's control record changed: ``pause()``, ``reschedule()``,
    ``add_job()`` …) the action and who made it, e.g. ``"pause by ops"``. ``error`` is
    the exception, if any.
    """

    type: EventType
    name: str | None
    slot: int | None
    attempt: int | None
    reason: str | None
    instance_id: str
    error: BaseException | None = None


Listener = Callable[[Event], object]


class Listeners:
    """Listeners by event type; a listener that raises is logged and never propagates."""

    def __init__(self) -> None:
        self._by_type: dict[str, list[Listener]] = {}

    def add(self, event: str, listener: Listener) -> None:
        if event not in EVENT_TYPES:
            raise ValueError(f"unknown event {event!r}; use one of {sorted(EVENT_TYPES)}")
        if not callable(listener):
            raise TypeError(f"listener for {event!r} must be callable, got {listener!r}")
        self._by_type.setdefault(event, []).append(listener)

    def wants(self, event: str) -> bool:
        """Whether emitting ``event`` does anything (what is logged about store errors
        is ``OutageLog``'s business, not the listeners')."""
        return event in self._by_type

    def emit(self, event: Event) -> None:
        for listener in list(self._by_type.get(event.type, [])):
            try:
                listener(event)
            except Exception:
                logger.exception("listener %r for %r event raised", listener, event.type)
