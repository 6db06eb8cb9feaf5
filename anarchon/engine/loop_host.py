"""Where a scheduler's engine lives: its event loop and its store connection.

``LoopHost`` is what reaches the engine from outside its loop, and what the components
that connect on demand share: the blocking [`Scheduler`][anarchon.Scheduler] (whose
calls come from other threads) is given ``AsyncScheduler.host`` and uses only these
methods; runtime control, trigger calls and queries call ``ensure_open()``; jobs and
handlers added from any thread reach the loop through ``on_loop()``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from ..backends.base import Backend
from .store_wait import StoreWait


class LoopHost:
    """The loop one scheduler runs on (once started) and its store connection."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        #: the loop ``start()`` ran on (``None`` before)
        self.loop: asyncio.AbstractEventLoop | None = None
        #: ``start(wait=True)`` retrying until the store answers (``abandon_start()``)
        self.store_wait = StoreWait(backend)
        #: the store was opened (``close()`` closes it)
        self.opened = False
        self._open_lock = asyncio.Lock()

    def bind(self) -> None:
        """The scheduler starts on the running loop: calls from other threads go there."""
        self.loop = asyncio.get_running_loop()

    async def ensure_open(self) -> None:
        """Open the store once (connects on demand: queries work before ``start()``)."""
        async with self._open_lock:
            if not self.opened:
                await self.backend.open()
                self.opened = True

    async def close(self) -> None:
        """Close the store if it was opened."""
        if self.opened:
            await self.backend.close()

    def on_loop(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` on the scheduler's loop: now if called there (or before
        ``start()``), else soon (jobs and handlers may be added from other threads)."""
        try:
            current = asyncio.get_running_loop()
        except RuntimeError:
            current = None
        if self.loop is None or current is self.loop:
            fn()
        else:
            self.loop.call_soon_threadsafe(fn)

    def abandon_start(self) -> None:
        """End a ``start(wait=True)`` that is waiting for the store (on the loop)."""
        self.store_wait.abandon()

    def abandon_start_soon(self) -> None:
        """``abandon_start()`` from any thread (a signal handler too): on the loop, soon;
        nothing before ``start()`` or once the loop is closed."""
        loop = self.loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self.abandon_start)


__all__ = ["LoopHost"]
