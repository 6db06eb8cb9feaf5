"""Keeps this instance's leases alive and watches runs that other instances hold.

One store round trip per heartbeat renews every held lease and reads every watched run,
so idle cost grows with running jobs, not registered ones.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar

from .aio import wait_event, within
from .backends.base import HeldRun, LeaseBackend, RunKey, RunState
from .context import AbortSignal
from .durations import to_ms

T = TypeVar("T")


@dataclass
class Held:
    """A run this instance executes, and when its lease was last renewed for sure."""

    run: HeldRun
    signal: AbortSignal
    #: monotonic time at which the last successful renewal (or the claim) was sent
    renewed_at: float = field(default_factory=time.monotonic)
    #: the handler returned and its outcome is being written: a "lost" answer is only
    #: that write winning the race with a renewal
    finishing: bool = False
    #: the keeper renews this run's lease at every beat; cleared when the run is dropped
    #: (it ended, was lost, handed over or detached) while it may still be in the table
    renewing: bool = True


class LeaseKeeper:
    """The heartbeat loop of one scheduler.

    ``on_lost(held)`` is called when the store says another instance owns a held run, or
    when renewals failed for a whole lease (judged on the monotonic clock from the last
    successful renewal's send time: the lease may have expired, so the run must stop).
    ``on_expired(state)`` is called for a watched run whose lease expired.

    ``runs`` is the table of runs executing here, owned by
    ``Attempts``; the keeper renews its entries that are
    ``renewing`` and keeps no table of its own (default: a table of its own, for tests).
    """

    def __init__(self, backend: LeaseBackend, owner: str, lease: float, heartbeat: float,
                 on_lost: Callable[[Held], None], on_expired: Callable[[RunState], None],
                 on_error: Callable[[BaseException], None],
                 runs: dict[RunKey, Held] | None = None) -> None:
        self.backend = backend
        self.owner = owner
        self.lease = lease
        self.heartbeat = heartbeat
        #: the run table (shared with the attempts that own it)
        self.held: dict[RunKey, Held] = {} if runs is None else runs
        self.watched: set[RunKey] = set()
        self._on_lost = on_lost
        self._on_expired = on_expired
        self._on_error = on_error
        self._wake = asyncio.Event()
        #: the loop the keeper beats on (its own thread's, see anarchon.leasethread) and
        #: the scheduler's, where every callback runs
        self._loop: asyncio.AbstractEventLoop | None = None
        self._home = _running_loop()
        #: held while a heartbeat is in flight. A write that changes a lease outside the
        #: beat (a detached run's long lease) takes it too, after dropping the run: a
        #: renewal sent before it but answered after it must not set the short lease again.
        self.renewing = asyncio.Lock()

    def hold(self, held: Held) -> None:
        """Renew ``held``'s lease from now on (it is put in the run table)."""
        held.renewing = True
        self.held[held.run.key] = held
        self.watched.discard(held.run.key)

    def drop(self, key: RunKey) -> None:
        """Renew the lease of run ``key`` no more (its entry stays until the run ends)."""
        held = self.held.get(key)
        if held is not None:
            held.renewing = False

    def renewed(self, key: RunKey) -> Held | None:
        """The entry of run ``key`` if its lease is renewed here, else ``None``."""
        held = self.held.get(key)
        return held if held is not None and held.renewing else None

    def watch(self, key: RunKey) -> None:
        if self.renewed(key) is None:
            self.watched.add(key)

    def unwatch(self, key: RunKey) -> bool:
        """Stop watching ``key``; True if it was watched."""
        if key in self.watched:
            self.watched.discard(key)
            return True
        return False

    def unwatch_all(self) -> None:
        self.watched.clear()

    def poke(self) -> None:
        """Run the next beat now (used when a new run is watched or held)."""
        loop = self._loop
        if loop is None or loop is _running_loop():
            self._wake.set()
        elif not loop.is_closed():
            loop.call_soon_threadsafe(self._wake.set)

    async def exclusive(self, write: Callable[[LeaseBackend], Awaitable[T]]) -> T:
        """``write(backend)`` on the keeper's loop and connection, between two beats (a
        renewal sent before it but answered after it cannot undo it)."""
        async def locked() -> T:
            async with self.renewing:
                return await write(self.backend)

        return await self._on_own_loop(locked())

    async def _on_own_loop(self, coro: Coroutine[Any, Any, T]) -> T:
        loop = self._loop
        if loop is None or loop is _running_loop():
            return await coro
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, loop))

    def _deliver(self, callback: Callable[[Any], None], arg: Any) -> None:
        """Call ``callback(arg)`` on the scheduler's loop (soon, if the keeper has its own)."""
        home = self._home
        if home is None or home is _running_loop():
            callback(arg)
        elif not home.is_closed():
            home.call_soon_threadsafe(callback, arg)

    async def run(self) -> None:
        """Beat every ``heartbeat`` seconds until cancelled."""
        self._loop = asyncio.get_running_loop()
        while True:
            await wait_event(self._wake, self.heartbeat)
            self._wake.clear()
            await self.beat()

    async def beat(self) -> None:
        """One heartbeat: renew, read watched runs, and act on what came back."""
        async with self.renewing:
            await self._beat()

    async def _beat(self) -> None:
        # copies first: the scheduler's thread may change the table meanwhile
        held = [entry for entry in list(self.held.values()) if entry.renewing]
        watched = list(self.watched)
        if not held and not watched:
            return
        sent_at = time.monotonic()
        try:
            result = await within(
                self.backend.heartbeat(self.owner, [h.run for h in held], watched,
                                       to_ms(self.lease)),
                timeout=max(self.heartbeat, self.lease / 2),
            )
        except Exception as exc:  # store unreachable: judge our leases locally
            self._deliver(self._on_error, exc)
            now = time.monotonic()
            for entry in held:
                if (now >= entry.renewed_at + self.lease and entry.renewing
                        and not entry.finishing):
                    self.drop(entry.run.key)
                    self._deliver(self._on_lost, entry)
            return
        for entry in held:
            key = entry.run.key
            if not entry.renewing:
                continue
            if key in result.lost:
                self.drop(key)
                if not entry.finishing:
                    self._deliver(self._on_lost, entry)
            else:
                entry.renewed_at = sent_at
        seen = {RunKey(s.name, s.slot): s for s in result.watched}
        for key in watched:
            state = seen.get(key)
            if state is None or not state.running:
                self.watched.discard(key)
            elif state.lease_expired:
                self.watched.discard(key)
                self._deliver(self._on_expired, state)


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
