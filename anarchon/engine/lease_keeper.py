"""Keeps this instance's leases alive and watches runs that other instances hold.

One store round trip per heartbeat renews every held lease and reads every watched run,
so idle cost grows with running jobs, not registered ones.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

from ..backends.base import LeaseBackend, RunKey, RunState
from ..durations import to_ms
from .aio import wait_event, within
from .deadlines import Deadlines
from .held_run import Held as Held
from .liveness import Liveness, liveness_for

T = TypeVar("T")

logger = logging.getLogger("anarchon")

#: a heartbeat call gets this fraction of a heartbeat (and never beyond the earliest lease
#: deadline of the runs it renews): on a silent network the next beat follows soon. After
#: a call timed out the next may take twice as long, and after a slow answer twice that
#: answer's time (a link with a round trip near the heartbeat still renews), always up to
#: the earliest deadline at most; quick answers bring it back to this fraction.
CALL_FRACTION = 0.8


class LeaseKeeper:
    """The heartbeat loop of one scheduler.

    ``on_lost(held)`` is called when the store says another instance owns a held run, or
    at the run's local lease deadline (see :mod:`anarchon.engine.deadlines`: the send time of the
    last renewal the store confirmed + lease - a safety margin, on the monotonic clock),
    whose timer thread aborts the run's signal first, whatever the beats are waiting for.
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
        #: the loop the keeper beats on (its own thread's, see anarchon.engine.lease_thread) and
        #: the scheduler's, where every callback runs
        self._loop: asyncio.AbstractEventLoop | None = None
        self._home = _running_loop()
        #: held while a heartbeat is in flight. A write that changes a lease outside the
        #: beat (a detached run's long lease) takes it too, after dropping the run: a
        #: renewal sent before it but answered after it must not set the short lease again.
        self.renewing = asyncio.Lock()
        #: the local lease deadline of every held run (a timer thread while `run()` runs)
        self.deadlines = Deadlines(self.held, lease, self.deadline_passed)
        #: how long a heartbeat call may take beyond CALL_FRACTION of a heartbeat (see
        #: there): 0 while calls are quick
        self.patience = 0.0
        #: this instance's liveness record, carried by every beat (``None``: the store
        #: keeps none, or the instance left)
        self.liveness: Liveness | None = liveness_for(backend, owner, lease, heartbeat)
        #: monotonic time of the last beat the store confirmed (or that had nothing to
        #: send), ``None`` before the first; ``on_beat()`` is called after each (on the
        #: keeper's thread): see anarchon.observability.health
        self.beaten_at: float | None = None
        self.on_beat: Callable[[], None] | None = None
        #: ``suspend()`` was called and ``resume()`` not yet: no beat is sent
        self.suspended = False

    def deadline_passed(self, held: Held) -> None:
        """``held``'s lease deadline passed (on the timer's thread, or in a beat): abort
        its signal now and report it lost on the scheduler's loop."""
        if not held.renewing or held.finishing:
            return
        held.renewing = False
        if held.signal.abort("lost"):
            logger.debug("run %s: no renewal confirmed for %.3fs, aborted at its lease "
                         "deadline", held.run.key, self.lease - self.deadlines.margin)
        self._deliver(self._on_lost, held)

    def hold(self, held: Held) -> None:
        """Renew ``held``'s lease from now on (it is put in the run table)."""
        held.renewing = True
        self.held[held.run.key] = held
        self.watched.discard(held.run.key)
        self.deadlines.poke()

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

    def runs_on(self, loop: asyncio.AbstractEventLoop) -> None:
        """The keeper will beat on ``loop`` (a lease thread's): pokes go there from now."""
        self._loop = loop

    async def run(self) -> None:
        """Beat every ``heartbeat`` seconds until cancelled."""
        self._loop = asyncio.get_running_loop()
        self.deadlines.start()
        try:
            while True:
                await wait_event(self._wake, self.heartbeat)
                self._wake.clear()
                await self.beat()
        finally:
            self.deadlines.stop()

    def suspend(self) -> None:
        """Send no beat until ``resume()``: to the store this instance is frozen (a
        stopped process, a long pause), while its runs go on and their local deadlines
        still abort them. For fault-injection tests (``AsyncScheduler.lease_keeper``)."""
        self.suspended = True

    def resume(self) -> None:
        """Beat again after ``suspend()``, starting now."""
        self.suspended = False
        self.poke()

    async def beat(self) -> None:
        """One heartbeat: renew, read watched runs, and act on what came back (nothing
        while suspended)."""
        if self.suspended:
            return
        async with self.renewing:
            await self._beat()

    async def _beat(self) -> None:
        # copies first: the scheduler's thread may change the table meanwhile
        held = [entry for entry in list(self.held.values()) if entry.renewing]
        watched = list(self.watched)
        live = self.liveness
        if not held and not watched and live is None:
            self._beaten()  # nothing to renew, nothing to lose
            return
        sent_at = time.monotonic()
        timeout = self.call_timeout(held, sent_at)
        runs = [h.run for h in held]
        lease_ms = to_ms(self.lease)
        try:
            result = await within(
                self.backend.heartbeat(self.owner, runs, watched, lease_ms) if live is None
                else live.beat(self.owner, runs, watched, lease_ms),
                timeout=timeout,
            )
        except Exception as exc:  # store unreachable: the deadlines judge our leases
            if isinstance(exc, asyncio.TimeoutError):
                self.patience = min(2 * timeout, self.lease)
            self._deliver(self._on_error, exc)
            self.deadlines.check()  # the timer does too; this one needs no thread
            return
        self._beaten()
        took = time.monotonic() - sent_at
        self.patience = 2 * took if took > self.heartbeat * CALL_FRACTION / 2 else 0.0
        for entry in held:
            key = entry.run.key
            if not entry.renewing:
                continue  # ended, or aborted at its deadline while the call was out
            if key in result.lost:
                self.drop(key)
                if not entry.finishing:
                    entry.vanished = key in result.gone
                    self._deliver(self._on_lost, entry)
            else:
                entry.renewed_at = max(entry.renewed_at, sent_at)
        seen = {RunKey(s.name, s.slot): s for s in result.watched}
        for key in watched:
            state = seen.get(key)
            if state is None or not state.running:
                self.watched.discard(key)
            elif state.lease_expired:
                self.watched.discard(key)
                self._deliver(self._on_expired, state)

    def _beaten(self) -> None:
        self.beaten_at = time.monotonic()
        if self.on_beat is not None:
            self.on_beat()

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T] | None:
        """Run ``coro`` on the keeper's loop from another thread (``None``: the keeper
        has not started beating, or its loop is closed)."""
        loop = self._loop
        if loop is None or loop.is_closed():
            coro.close()
            return None
        return asyncio.run_coroutine_threadsafe(coro, loop)

    async def leave(self) -> None:
        """Remove this instance's liveness record, between two beats (none follows)."""
        async def locked() -> None:
            async with self.renewing:
                live, self.liveness = self.liveness, None
                if live is not None:
                    await live.leave()

        await self._on_own_loop(locked())

    def call_timeout(self, held: list[Held], sent_at: float) -> float:
        """How long a heartbeat sent at ``sent_at`` may take: `CALL_FRACTION` of a
        heartbeat (or the `patience` slow answers earned), and no longer than the earliest
        deadline (still ahead) of ``held``."""
        limit = max(self.heartbeat * CALL_FRACTION, self.patience)
        for entry in held:
            ahead = self.deadlines.deadline(entry) - sent_at
            if 0 < ahead < limit:
                limit = ahead
        return limit


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
