"""Test helpers: collecting events and waiting with a deadline (never sleep-and-hope)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from anarchon import AsyncScheduler, Event
from anarchon.backends.base import ClaimRequest

T = TypeVar("T")

ALL_EVENTS = ("start", "success", "failure", "interrupted", "skip", "lost", "error", "change")


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to completion in a fresh event loop."""
    return asyncio.run(coro)


class EventLog:
    """Every event of the schedulers it is attached to, with arrival times."""

    def __init__(self) -> None:
        self.events: list[tuple[float, Event]] = []

    def attach(self, scheduler: AsyncScheduler) -> AsyncScheduler:
        for kind in ALL_EVENTS:
            scheduler.on(kind, self._record)  # type: ignore[arg-type]
        return scheduler

    def _record(self, event: Event) -> None:
        self.events.append((time.monotonic(), event))

    def of(self, type_: str, name: str | None = None) -> list[Event]:
        return [e for _, e in self.events if e.type == type_ and (name is None or e.name == name)]

    def when(self, predicate: Callable[[Event], bool]) -> float | None:
        """Arrival time of the first event matching ``predicate``."""
        return next((t for t, e in self.events if predicate(e)), None)

    async def wait(self, predicate: Callable[[Event], bool], timeout: float) -> Event:
        """Wait until an event matches ``predicate``; fail after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            for _, event in self.events:
                if predicate(event):
                    return event
            if time.monotonic() > deadline:
                seen = [(e.type, e.instance_id, e.slot, e.attempt, e.reason) for _, e in
                        self.events]
                raise AssertionError(f"no matching event within {timeout}s; saw {seen}")
            await asyncio.sleep(0.02)


async def wait_until(check: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll ``check`` until true; fail naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.02)


def claim_only_request(slot: int, owner: str, name: str = "job",
                       **overrides: Any) -> ClaimRequest:
    """A scheduled claim with claim-only defaults (no lease, one attempt, 60 s late)."""
    fields: dict[str, Any] = dict(name=name, slot=slot, owner=owner, reason="scheduled",
                                  lease_ms=0, max_late_ms=60_000, max_attempts=1,
                                  overlap="allow")
    fields.update(overrides)
    return ClaimRequest(**fields)


def now_ms() -> int:
    """Wall-clock epoch milliseconds."""
    return int(time.time() * 1000)
