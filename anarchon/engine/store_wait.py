"""Waiting for a store that does not answer yet, for the long-running entry points.

``start(wait=True)`` (used by ``Scheduler.run()``, ``AsyncScheduler.run()`` and the
framework commands that run for ever) retries the connection with a capped backoff
instead of failing: an instance deployed while its store is down (or before it, in the
same rollout) starts by itself once the store answers. One WARNING names the store (its
password redacted) when the first attempt fails, then one every `WARN_EVERY` seconds.
"""

from __future__ import annotations

import asyncio
import logging
import random
import signal
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Protocol

from ..backends.base import Backend
from ..durations import DurationLike
from ..errors import StoreError
from .aio import wait_event


class Served(Protocol):
    """What ``serve()`` runs: a scheduler's start, stop and state."""

    @property
    def running(self) -> bool: ...

    async def start(self, wait: bool = False) -> None: ...

    async def stop(self, timeout: DurationLike = 30) -> None: ...

logger = logging.getLogger("anarchon")

#: the first retry comes this long after a failed attempt (seconds); each next one doubles
FIRST_DELAY = 0.5
#: the longest wait between two attempts (seconds): how late a store that came back is seen
MAX_DELAY = 10.0
#: a still-unreachable store is logged again this often (seconds)
WARN_EVERY = 30.0
#: what a store that is down (or not reachable yet) raises; anything else fails at once
RETRIED: tuple[type[BaseException], ...] = (StoreError, OSError, asyncio.TimeoutError)


def retry_delay(failures: int) -> float:
    """Seconds to wait after ``failures`` failed attempts: `FIRST_DELAY` doubled per
    failure, capped at `MAX_DELAY`, less up to 20 % at random (instances restarted together
    do not retry in step)."""
    if failures < 1:
        raise ValueError(f"failures must be >= 1, got {failures}")
    base: float = min(FIRST_DELAY * 2.0 ** min(failures - 1, 30), MAX_DELAY)
    return base * random.uniform(0.8, 1.0)


def one_line(exc: BaseException) -> str:
    """``exc`` as one line, its type included."""
    return f"{type(exc).__name__}: {' '.join(str(exc).split())}"


class StoreWait:
    """Retries a connection until it succeeds or `abandon()` is called."""

    def __init__(self, backend: Backend) -> None:
        self._backend = backend
        self._abandoned = asyncio.Event()
        self._ended = asyncio.Event()
        self._ended.set()  # not waiting
        #: set by ``abandon()``: the ``serve()`` under way, if any, stops
        self.run_stopped: asyncio.Event | None = None

    def abandon(self) -> None:
        """Stop waiting (on the loop's thread): ``until()`` returns ``False``."""
        self._abandoned.set()
        if self.run_stopped is not None:
            self.run_stopped.set()

    async def ended(self) -> None:
        """Return once no ``until()`` is running (``stop()`` awaits the wait it ended, so
        the ``start()`` it interrupted has returned before the loop is closed)."""
        await self._ended.wait()

    async def until(self, connect: Callable[[], Awaitable[None]]) -> bool:
        """Await ``connect()`` until it does not raise one of `RETRIED`; ``True`` once it
        succeeded, ``False`` if abandoned first."""
        self._ended.clear()
        try:
            return await self._until(connect)
        finally:
            self._ended.set()

    async def _until(self, connect: Callable[[], Awaitable[None]]) -> bool:
        began = time.monotonic()
        warned_at: float | None = None
        failures = 0
        while not self._abandoned.is_set():
            try:
                await connect()
            except RETRIED as exc:
                failures += 1
                now = time.monotonic()
                if warned_at is None or now - warned_at >= WARN_EVERY:
                    warned_at = now
                    logger.warning(
                        "store %r does not answer (%s); retrying until it does (for %.0fs "
                        "so far, %d attempt(s); next warning in %.0fs)", self._backend,
                        one_line(exc), now - began, failures, WARN_EVERY)
                if await wait_event(self._abandoned, retry_delay(failures)):
                    return False
            else:
                if failures:
                    logger.info("store %r answered after %.1fs and %d failed attempt(s); "
                                "starting", self._backend, time.monotonic() - began, failures)
                return True
        return False


async def serve(core: Served, waiting: StoreWait, stop_timeout: DurationLike) -> None:
    """[`AsyncScheduler.run()`][anarchon.AsyncScheduler.run]: ``start(wait=True)``, then
    run until SIGINT/SIGTERM (handled on the main thread's loop only) or ``stop()``."""
    stopped = asyncio.Event()
    loop = asyncio.get_running_loop()

    def request_stop() -> None:
        stopped.set()
        waiting.abandon()

    handled = []
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                loop.add_signal_handler(sig, request_stop)
            except (NotImplementedError, RuntimeError):  # not on this platform or loop
                continue
            handled.append(sig)
    waiting.run_stopped = stopped
    try:
        await core.start(wait=True)
        if core.running:
            await stopped.wait()
    finally:
        for sig in handled:
            loop.remove_signal_handler(sig)
        await core.stop(stop_timeout)
