"""The plan: when each job's next slot is due, earliest first.

One task of the engine sleeps until the earliest due time and claims everything due
then, instead of one sleeping task per job: jobs due together wake together (one timer,
one loop turn, one batched claim where the store allows it), and registered jobs cost a
heap entry each, not a task.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import random
from dataclasses import dataclass

from ..clock import Clock, SystemClock
from ..jobs.definition import Job
from .batcher import on_grid


@dataclass(frozen=True)
class Due:
    """Slot ``slot`` of job ``name`` is to be claimed at ``at_ms`` (slot + jitter)."""

    at_ms: float
    name: str
    slot: int
    #: the slot after ``slot`` (``None``: the schedule has no more), computed once for
    #: the jitter cap and reused as the job's next entry
    following: int | None
    #: the job's control version the entry was planned from (the claim's version fence)
    version: int = 0


class Plan:
    """Due entries in a heap; at most one live entry per job.

    Replacing or removing a job only bumps its generation: stale entries are dropped when
    they reach the top (cheaper than searching the heap).
    """

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, int, Due]] = []
        self._order = itertools.count()
        self._generation: dict[str, int] = {}

    def __len__(self) -> int:
        """Jobs with a live entry."""
        return len(self._generation)

    def put(self, due: Due) -> bool:
        """Plan ``due`` as its job's only entry; True if it is now the earliest."""
        # a fresh number, never reused: a removed job added again gets no stale entry back
        generation = self._generation[due.name] = next(self._order)
        self._push(due, generation)
        return self._heap[0][3] is due

    def follow(self, due: Due) -> bool:
        """Plan ``due`` as the next entry of its job (whose entry was just popped), unless
        the job was removed meanwhile; True if planned."""
        generation = self._generation.get(due.name)
        if generation is None:
            return False
        self._push(due, generation)
        return True

    def remove(self, name: str) -> None:
        """Forget job ``name``: its entries never come due."""
        self._generation.pop(name, None)

    def pop_due(self, now_ms: float) -> list[Due]:
        """Every live entry due at or before ``now_ms``, earliest first."""
        heap, popped = self._heap, []
        while heap and heap[0][0] <= now_ms:
            _, _, generation, due = heapq.heappop(heap)
            if self._generation.get(due.name) == generation:
                popped.append(due)
        return popped

    def next_at(self) -> float | None:
        """When the earliest live entry is due, or ``None`` if nothing is planned."""
        heap = self._heap
        while heap and self._generation.get(heap[0][3].name) != heap[0][2]:
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    def _push(self, due: Due, generation: int) -> None:
        heapq.heappush(self._heap, (due.at_ms, next(self._order), generation, due))


class Alarm:
    """The planner's sleep: for some seconds on the clock, or until ``wake()`` (a job
    was planned earlier than the planner's wake-up)."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self._woken: asyncio.Future[None] | None = None

    def wake(self) -> None:
        """End the current sleep now (nothing happens if nobody sleeps)."""
        if self._woken is not None:
            _resolve(self._woken)

    async def sleep(self, seconds: float | None) -> None:
        """Sleep ``seconds`` on the clock (``None``: until woken), or until woken."""
        loop = asyncio.get_running_loop()
        woken = self._woken = loop.create_future()
        try:
            if seconds is None:
                await woken
            elif isinstance(self.clock, SystemClock):  # one timer, no extra task
                timer = loop.call_later(seconds, _resolve, woken)
                try:
                    await woken
                finally:
                    timer.cancel()
            else:
                sleeper = asyncio.ensure_future(self.clock.sleep(seconds))
                try:
                    await asyncio.wait({sleeper, woken}, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    sleeper.cancel()
        finally:
            self._woken = None


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


__all__ = ["Alarm", "Due", "Plan"]


def jitter_cap_ms(jitter: float, slot: int, following: int | None) -> float:
    """The most a claim of ``slot`` may wait: ``jitter``, but under half the gap to the
    next slot. A wait past the next slot would let that slot be claimed first, and with
    ``overlap="skip"`` one of the two would never run (an ``every 1s`` job with the
    default 2 s jitter lost slots that way)."""
    cap = jitter * 1000
    if following is not None:
        cap = min(cap, (following - slot) / 2)
    return cap


def claim_delay_ms(job: Job, slot: int, following: int | None, grid_ms: float) -> float:
    """How long after ``slot`` its claim is sent: a random draw up to the job's jitter
    (capped by ``jitter_cap_ms()``), rounded up to ``grid_ms`` when claims are batched
    (never beyond the cap) so that jobs due within one grid step are claimed together."""
    cap_ms = jitter_cap_ms(job.jitter, slot, following)
    delay_ms = random.uniform(0, cap_ms / 1000) * 1000
    return on_grid(delay_ms, grid_ms, cap_ms) if grid_ms > 0 else delay_ms
