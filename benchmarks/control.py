"""Runtime control: how soon every running instance applies a change, and that no slot of
an old definition starts once the change has returned.

Three instances (``AsyncScheduler``s in this process, each with its own backend and
connection) run one job every 2 s; a fourth scheduler on the same store, never
started, makes the changes. Each trial is ``pause()``, ``resume()``, then
``reschedule()`` onto the other grid (every 2 s at offset 0 s or 1 s, so a start tells
which definition planned it), each at a random moment of the slot grid.

Latency: the call's return → the last instance's ``change`` event for the new version
(negative: every instance applied it before the call returned, through the wake-up).
Measured with the backend's wake-up channel (Redis/Valkey pub/sub, PostgreSQL
``LISTEN``) where it has one, and without (``watch`` made a no-op on the instances'
backends: they notice a change at their next trigger poll, every heartbeat).

Old-definition starts: every attempt the store recorded (``history()``: ``started_at`` is
the store's time inside the claim) is checked against the definitions in force. A start
at time t, after change k returned, must fit change k's definition or change k+1's
(stored before t, perhaps, but not yet returned). Must be 0. ``fenced``: claims the
store refused as ``stale`` (planned from a definition it had already replaced).
"""

from __future__ import annotations

import asyncio
import bisect
import dataclasses
import random
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from anarchon import AsyncScheduler, Event, RunContext, from_url
from anarchon.backends.base import Backend, ClaimResult
from anarchon.backends.capabilities import ControlStore
from anarchon.control.changes import Change
from anarchon.history import RunRecord
from tests.harness.cleanup import cleanup
from tests.harness.rig import backend_url

from .common import summary_ms

JOB = "ctl"
INSTANCES = 3
LEASE = 10.0
ACTIONS = ("pause", "resume", "reschedule")


@dataclass(frozen=True)
class Definition:
    """What the job's record says: paused, or every 2 s at ``offset_ms``."""

    paused: bool = False
    offset_ms: int = 0

    def fits(self, slot: int) -> bool:
        return not self.paused and slot % 2000 == self.offset_ms


class _Instances:
    """The three running instances, the time each applied each version, and the claims
    the store refused as stale."""

    def __init__(self, url: str, heartbeat: float, channel: bool) -> None:
        self.applied: dict[str, dict[int, float]] = {}
        self.fenced = 0
        self.schedulers: list[AsyncScheduler] = []
        for i in range(INSTANCES):
            backend = from_url(url)
            if not channel:  # the trigger poll (every heartbeat) is then the only news
                setattr(backend, "watch", _no_watch)  # noqa: B010 - a method, to mypy
            self._count_stale(backend)
            scheduler = AsyncScheduler(backend, instance_id=f"m{i}", lease=LEASE,
                                       heartbeat=heartbeat, jitter=0)
            scheduler.every(JOB, "2s", _handler, history_size=10_000, catch_up=0)
            self.applied[scheduler.instance_id] = {}
            scheduler.on("change", self._listener(scheduler))
            self.schedulers.append(scheduler)

    def _listener(self, scheduler: AsyncScheduler) -> Callable[[Event], None]:
        seen = self.applied[scheduler.instance_id]

        def on_change(event: Event) -> None:
            if event.name == JOB:
                seen.setdefault(scheduler.control.controls.version(JOB), time.perf_counter())

        return on_change

    def _count_stale(self, backend: Backend) -> None:
        claim, claim_many = backend.claim, backend.claim_many

        async def counted_claim(request: Any) -> ClaimResult:
            result = await claim(request)
            self.fenced += result.outcome == "stale"
            return result

        async def counted_many(requests: Sequence[Any]) -> list[ClaimResult | Exception]:
            results = await claim_many(requests)
            self.fenced += sum(isinstance(r, ClaimResult) and r.outcome == "stale"
                               for r in results)
            return results

        setattr(backend, "claim", counted_claim)  # noqa: B010 - a method, to mypy
        setattr(backend, "claim_many", counted_many)  # noqa: B010 - a method, to mypy

    async def applied_by_all(self, version: int, timeout: float) -> float:
        """Wait until every instance applied ``version``; the last one's time."""
        deadline = time.monotonic() + timeout
        while True:
            times = [min((t for v, t in seen.items() if v >= version), default=None)
                     for seen in self.applied.values()]
            if all(t is not None for t in times):
                return max(t for t in times if t is not None)
            if time.monotonic() > deadline:
                raise TimeoutError(f"version {version} of {JOB!r} not applied by every "
                                   f"instance within {timeout:g}s: {self.applied}")
            await asyncio.sleep(0.002)


async def _until(check: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"no {what} after {timeout:g}s")
        await asyncio.sleep(0.01)


async def _no_watch(notify: Callable[..., None]) -> None:
    """``Backend.watch`` of a store without a wake-up channel: returns at once."""


async def _handler(ctx: RunContext) -> None:
    """Nothing to do: the store's history records each start."""


def has_channel(url: str) -> bool:
    """Whether the backend of ``url`` has a wake-up channel (overrides ``watch``)."""
    return type(from_url(url)).watch is not Backend.watch


async def _change(controller: AsyncScheduler, action: str,
                  definition: Definition) -> tuple[Change, Definition]:
    if action == "pause":
        return await controller.pause(JOB), dataclasses.replace(definition, paused=True)
    if action == "resume":
        return await controller.resume(JOB), dataclasses.replace(definition, paused=False)
    offset = 1000 - definition.offset_ms
    change = await controller.reschedule(JOB, every="2s", offset=f"{offset // 1000}s")
    return change, dataclasses.replace(definition, offset_ms=offset)


def old_definition_starts(records: Sequence[RunRecord],
                          changes: Sequence[tuple[float, Definition]]) -> list[RunRecord]:
    """Scheduled or catch-up starts that fit neither the definition in force when they
    started nor the next one (``changes``: return time and new definition, in order;
    the first one is the initial definition)."""
    returns = [t for t, _ in changes]
    bad = []
    for record in records:
        if record.reason not in ("scheduled", "catch-up"):
            continue  # takeovers and manual runs are not planned from the schedule
        k = bisect.bisect_right(returns, record.started_at.timestamp()) - 1
        allowed = [d for _, d in changes[max(k, 0):k + 2]]
        if not any(d.fits(record.slot) for d in allowed):
            bad.append(record)
    return bad


async def _mode(url: str, trials: int, heartbeat: float, channel: bool,
                seed: int) -> tuple[dict[str, list[float]], int, int, int]:
    """One run of ``trials`` trials: latencies by action, starts after the first
    change, old-definition starts, fenced claims."""
    instances = _Instances(url, heartbeat, channel)
    controller = AsyncScheduler(from_url(url), instance_id="controller")
    rng = random.Random(seed)
    latencies: dict[str, list[float]] = {action: [] for action in ACTIONS}
    definition = Definition()
    changes: list[tuple[float, Definition]] = [(float("-inf"), definition)]
    await asyncio.gather(*(s.start() for s in instances.schedulers))
    try:
        if channel:  # measured with the channel up on every instance
            await _until(lambda: all(s.stats().wake_channel_up for s in instances.schedulers),
                         10, "the wake-up channel up on every instance")
        for _ in range(trials):
            for action in ACTIONS:
                await asyncio.sleep(rng.uniform(0.0, 2.0))  # anywhere on the 2 s grid
                change, definition = await _change(controller, action, definition)
                returned, wall = time.perf_counter(), time.time()
                changes.append((wall, definition))
                last = await instances.applied_by_all(change.version, 3 * heartbeat + 10)
                latencies[action].append(last - returned)
        await asyncio.sleep(2.1)  # one more slot on the last definition
    finally:
        await asyncio.gather(*(s.stop(5) for s in instances.schedulers))
    records = await controller.history(JOB, 10_000)
    await controller.backend.close()
    after = [r for r in records if r.started_at.timestamp() >= changes[1][0]]
    return latencies, len(after), len(old_definition_starts(records, changes)), \
        instances.fenced


async def measure(store: str, base: str | None, workdir: Path, trials: int,
                  heartbeat: float) -> list[dict[str, Any]]:
    """Rows per wake-up mode and action on ``store`` (see the module docstring)."""
    async def remove(namespace: str) -> None:
        await cleanup(store, base, namespace, [JOB])

    return await measure_on(store, lambda ns: backend_url(store, base, ns, workdir), trials,
                            heartbeat, remove)


async def measure_on(store: str, make_url: Callable[[str], str], trials: int,
                     heartbeat: float,
                     remove: Callable[[str], Awaitable[None]] | None = None
                     ) -> list[dict[str, Any]]:
    """``measure()`` on the backend URLs ``make_url`` gives for a namespace (called in a
    thread: the Django store migrates there); ``remove`` clears a namespace after."""
    probe_url = await asyncio.to_thread(make_url, f"ct{uuid.uuid4().hex[:8]}")
    if not isinstance(from_url(probe_url), ControlStore):
        return [{"backend": store, "error": f"skipped: the {store} store has no runtime "
                 "control on this branch"}]
    modes = [False, True] if has_channel(probe_url) else [False]
    rows = []
    for channel in modes:
        namespace = f"ct{uuid.uuid4().hex[:8]}"
        url = await asyncio.to_thread(make_url, namespace)
        began = time.monotonic()
        try:
            latencies, starts, old, fenced = await _mode(url, trials, heartbeat, channel,
                                                         seed=trials)
        finally:
            if remove is not None:
                await remove(namespace)
        for action in ACTIONS:
            summary = summary_ms(latencies[action])
            rows.append({
                "backend": store, "wakeup": "channel" if channel else "poll only",
                "change": action, "heartbeat": heartbeat, "lease": LEASE,
                "trials": len(latencies[action]), **summary,
                "within_heartbeat": (summary["max_ms"] or 0) <= heartbeat * 1000,
                "starts_after_first_change": starts, "old_definition_starts": old,
                "fenced_claims": fenced, "elapsed_s": round(time.monotonic() - began, 1),
            })
    return rows


__all__ = ["Definition", "measure", "measure_on", "old_definition_starts"]
