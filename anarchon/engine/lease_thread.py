"""The lease keeper on a thread of its own, with its own event loop and store connection.

An ``async def`` handler that blocks the scheduler's loop (``time.sleep``, CPU work, a
blocking driver) must not stop the renewals of the leases held here: a backup would take
the run over while it still runs, and two copies would run at once. The keeper therefore
beats on this thread, through a clone of the backend
([`LeaseBackend.lease_clone()`][anarchon.backends.base.LeaseBackend.lease_clone]); its
callbacks (lost, expired, error) run on the scheduler's loop. A backend built on a client
the application passed in has no clone: its keeper stays on the scheduler's loop (a second
connection of the application's client cannot be made without knowing how it was built).
"""

from __future__ import annotations

import asyncio
import logging

from ..backends.base import LeaseBackend
from .aio import cancel_and_wait
from .lease_keeper import LeaseKeeper
from .portal import Portal

logger = logging.getLogger("anarchon")


class LeaseThread:
    """Runs ``keeper`` (built on ``clone``) on its own thread until `stop()`."""

    def __init__(self, keeper: LeaseKeeper, clone: LeaseBackend) -> None:
        self.keeper = keeper
        self.clone = clone
        self._portal = Portal("anarchon-leases")
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Start the thread, open the connection there, then start the keeper's beats.

        The store answered the scheduler just before: a failure to open raises (like any
        store error at start) rather than leaving the leases unrenewed.
        """
        loop = self._portal.loop()
        self.keeper.runs_on(loop)
        try:
            await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(self._begin(), loop))
        except BaseException:
            await asyncio.to_thread(self._portal.close)
            raise

    async def _begin(self) -> None:
        await self.clone.open()
        self._task = asyncio.ensure_future(self._beat())

    async def _beat(self) -> None:
        try:
            await self.keeper.run()
        finally:
            try:
                await self.clone.close()
            except Exception as exc:  # closing a connection that failed: nothing to do
                logger.debug("closing the lease connection: %s", exc)

    async def stop(self) -> None:
        """Stop the beats, close the connection and end the thread."""
        async def end() -> None:
            if self._task is not None:
                await cancel_and_wait([self._task])

        if self._portal.active:
            await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(
                end(), self._portal.loop()))
            await asyncio.to_thread(self._portal.close)
