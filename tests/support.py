"""Test helpers: collecting events and waiting with a deadline (never sleep-and-hope)."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from typing import Any, TypeVar

from anarchon import AsyncScheduler, Event
from anarchon.backends import Backend
from anarchon.backends.base import ClaimRequest
from anarchon.backends.capabilities import TriggerStore
from anarchon.testing.support import run as run
from anarchon.testing.support import wait_until as wait_until

T = TypeVar("T")

ALL_EVENTS = ("start", "success", "failure", "interrupted", "skip", "lost", "error", "change")


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


async def registered(scheduler: AsyncScheduler, name: str, timeout: float) -> None:
    """Wait until ``scheduler.jobs()`` lists job ``name`` (its registration, sent by the
    instance that declares it, reached the store); fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while name not in {info.name for info in await scheduler.jobs()}:
        assert time.monotonic() < deadline, f"{name!r} was not registered in {timeout}s"
        await asyncio.sleep(0.05)


def counted_polls(backend: Backend, calls: list[float]) -> Backend:
    """``backend``, each of whose trigger polls (``poll()`` on a store with runtime
    control, else ``take_triggers()``) is appended to ``calls`` (monotonic time)."""
    assert isinstance(backend, TriggerStore)
    take, poll = backend.take_triggers, backend.poll

    async def counted_take(names: Any) -> Any:
        calls.append(time.monotonic())
        return await take(names)

    async def counted_poll(names: Any) -> Any:
        calls.append(time.monotonic())
        return await poll(names)

    backend.take_triggers = counted_take  # type: ignore[method-assign]
    backend.poll = counted_poll  # type: ignore[method-assign]
    return backend


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


def open_connections(pid: int, port: int) -> int:
    """Established TCP connections of process ``pid`` to remote ``port`` (Linux
    ``/proc``: the process's socket inodes matched against the kernel's TCP tables)."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:  # closed meanwhile
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    count = 0
    for table in ("tcp", "tcp6"):
        with open(f"/proc/{pid}/net/{table}") as handle:
            next(handle)  # the header
            for line in handle:
                fields = line.split()
                remote, state, inode = fields[2], fields[3], fields[9]
                if state == "01" and int(remote.rsplit(":", 1)[1], 16) == port and \
                        inode in inodes:
                    count += 1
    return count
