"""Slots given up as ``late`` or ``overlap``, written to history.

The claim step decides the skip; this instance then sends the skips of one turn of the
event loop (a planner step's answers arrive together) to the store in one call
([`SkipStore.record_skips()`][anarchon.backends.capabilities.SkipStore.record_skips]), off the claim
path, so claims cost no extra store call. A record that cannot be written (the store
failed) is logged; the skip itself was already logged and counted (``jobs()``).
"""

from __future__ import annotations

import asyncio
import logging

from ..backends.capabilities import SkipStore, as_skips
from ..backends.skips import Skip, SkipReason
from ..jobs.definition import Job
from .batcher import DEFAULT_MAX_SIZE, chunks
from .finish_records import history_ttl_ms
from .runtime import Runtime

logger = logging.getLogger("anarchon")

#: how long ``stop()`` waits for skip records still being written (seconds)
DRAIN_TIMEOUT = 2.0


class SkipRecords:
    """Collects this instance's skips and writes them in batches."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self._pending: list[Skip] = []
        self._writer: asyncio.Task[None] | None = None

    def add(self, job: Job, slot: int, reason: SkipReason) -> None:
        """Record that ``job``'s ``slot`` was given up for ``reason`` (soon, in a batch)."""
        if not isinstance(self.runtime.backend, SkipStore):
            return
        self._pending.append(Skip(job.name, slot, self.runtime.instance_id, reason,
                                  job.history_size, history_ttl_ms(job.history_ttl)))
        if self._writer is None:
            self._writer = self.runtime.spawn(self._write())

    async def _write(self) -> None:
        try:
            await asyncio.sleep(0)  # the rest of this loop turn's answers join the batch
            while self._pending:
                batch, self._pending = self._pending, []
                for part in chunks(batch, DEFAULT_MAX_SIZE):
                    await self._send(part)
        finally:
            self._writer = None

    async def _send(self, skips: list[Skip]) -> None:
        try:
            await as_skips(self.runtime.backend).record_skips(skips)
        except Exception as exc:
            logger.warning("%d skip record(s) not written to history (%s: %s); the skips "
                           "were logged and counted", len(skips), type(exc).__name__, exc)

    async def drain(self) -> None:
        """Wait (up to ``DRAIN_TIMEOUT``) for the records being written."""
        if self._writer is not None:
            await asyncio.wait({self._writer}, timeout=DRAIN_TIMEOUT)


__all__ = ["DRAIN_TIMEOUT", "SkipRecords"]
