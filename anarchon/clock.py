"""Clocks. The engine reads wall time for slots and monotonic time for leases.

Tests inject `FakeClock` to make slot maths, DST and catch-up deterministic.
"""

from __future__ import annotations

import asyncio
import time
from typing import Protocol


class Clock(Protocol):
    """What the engine needs from a clock."""

    def time(self) -> float:
        """Wall-clock seconds since the epoch (must be NTP-synchronised across instances)."""

    def monotonic(self) -> float:
        """Seconds on a clock that never jumps; used to judge lease expiry locally."""

    async def sleep(self, seconds: float) -> None:
        """Sleep ``seconds`` of this clock's time."""


class SystemClock:
    """The real clocks of this machine."""

    def time(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))


class OffsetClock(SystemClock):
    """The system clock shifted by ``offset`` seconds (to simulate clock skew)."""

    def __init__(self, offset: float) -> None:
        self.offset = offset

    def time(self) -> float:
        return time.time() + self.offset


class FakeClock:
    """A clock that only moves when told to; sleepers wake when it passes their deadline."""

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self._now = start
        self._mono = 0.0
        self._sleepers: list[tuple[float, asyncio.Future[None]]] = []

    def time(self) -> float:
        return self._now

    def monotonic(self) -> float:
        return self._mono

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._sleepers.append((self._mono + seconds, future))
        await future

    def advance(self, seconds: float) -> None:
        """Move both clocks forward and wake every sleeper whose deadline has passed."""
        self._now += seconds
        self._mono += seconds
        due = [f for deadline, f in self._sleepers if deadline <= self._mono]
        self._sleepers = [(d, f) for d, f in self._sleepers if d > self._mono]
        for future in due:
            if not future.done():
                future.set_result(None)


SYSTEM_CLOCK = SystemClock()
