"""Finishing detached runs from another process: a task queue worker reports outcomes.

A scheduler handler calls ``token = ctx.detach()`` and sends a message carrying
``token.to_headers()``; the worker that executes the message uses a
[`Tracker`][anarchon.tracking.Tracker] (blocking) or
[`AsyncTracker`][anarchon.tracking.AsyncTracker] to keep the run's lease alive while it
works, to note what is happening (e.g. a retry) and to record the outcome. Every write is
fenced by the token: a replaced attempt changes nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from .backends.base import Backend, HeldRun, LeaseBackend
from .context import RunToken
from .durations import DurationLike, parse_duration, to_ms
from .engine.finish_records import build_finish
from .engine.portal import Portal
from .history import RunStatus
from .jobs.definition import DEFAULT_RETAIN_RUNS_MS, check_heartbeat


class AsyncTracker:
    """Keeps detached runs alive and records how they ended.

    ``lease``/``heartbeat`` apply while a worker executes a run (they should match the
    schedulers'); ``history_size``/``history_ttl`` bound the job's history on finish.
    The finished run row is kept as ``anarchon.jobs.definition.retention_ms`` rules for a job
    with the default ``max_late``, ``catch_up`` and ``jitter`` (a worker does not know
    the job's own values; the rule's hour of margin covers ordinary ones).
    """

    def __init__(self, backend: Backend, *, lease: DurationLike = 30,
                 heartbeat: DurationLike = 5, history_size: int = 100,
                 history_ttl: DurationLike | None = None) -> None:
        self.backend = backend
        self.lease = parse_duration(lease, option="lease")
        self.heartbeat = parse_duration(heartbeat, option="heartbeat")
        check_heartbeat(self.heartbeat, self.lease)
        self.history_size = history_size
        self.history_ttl = (parse_duration(history_ttl, option="history_ttl")
                            if history_ttl is not None else None)
        self._beats: dict[RunToken, asyncio.Task[None]] = {}
        self._opened = False

    async def _open(self) -> None:
        if not self._opened:
            await self.backend.open()
            self._opened = True

    async def begin(self, token: RunToken) -> bool:
        """A worker starts executing the run: renew its lease and keep renewing it.

        Returns False if the attempt was replaced (the worker should not run it).
        """
        await self._open()
        if not isinstance(self.backend, LeaseBackend):
            return True
        if not await self._renew(token):
            return False
        if token not in self._beats:
            self._beats[token] = asyncio.ensure_future(self._beat(token))
        return True

    async def _renew(self, token: RunToken) -> bool:
        assert isinstance(self.backend, LeaseBackend)
        run = HeldRun(token.name, token.slot, token.attempt)
        result = await self.backend.heartbeat(token.owner, [run], [], to_ms(self.lease))
        return run.key not in result.lost

    async def _beat(self, token: RunToken) -> None:
        while True:
            await asyncio.sleep(self.heartbeat)
            with contextlib.suppress(Exception):  # a missed beat: the next one may work
                if not await self._renew(token):
                    return

    async def note(self, token: RunToken, text: str) -> bool:
        """Attach a detail text to the run while it stays ``running`` (e.g. ``"retrying:
        ValueError: …"`` while a task queue retries it): history shows it as the record's
        ``error`` until the outcome replaces it (a success clears it).

        Returns False when nothing was written: the attempt was replaced or has finished,
        or the backend holds no leases (a claim-only backend keeps no fenced running
        record to annotate; `begin()` and `end()` still work there).
        """
        if not isinstance(text, str):
            raise TypeError(f"note text must be a str, got {type(text).__name__}")
        await self._open()
        if not isinstance(self.backend, LeaseBackend):
            return False
        run = HeldRun(token.name, token.slot, token.attempt)
        return await self.backend.note(token.owner, run, text)

    async def end(self, token: RunToken, status: RunStatus, error: str | None = None, *,
                  history_size: int | None = None,
                  history_ttl: DurationLike | None = None) -> bool:
        """Record the outcome; False if the attempt had been replaced (nothing written).

        ``history_size``/``history_ttl`` replace the tracker's for this job (the job's
        own options, carried by the message)."""
        await self._open()
        beat = self._beats.pop(token, None)
        if beat is not None:
            beat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await beat
        keep = self.history_size if history_size is None else history_size
        ttl_s = (self.history_ttl if history_ttl is None
                 else parse_duration(history_ttl, option="history_ttl"))
        return await self.backend.finish(build_finish(
            token.name, token.slot, token.owner, token.attempt, status, error,
            history_size=keep, history_ttl=ttl_s, retain_runs_ms=DEFAULT_RETAIN_RUNS_MS,
        ))

    async def close(self) -> None:
        """Stop renewing and close the backend connections this tracker opened."""
        for beat in self._beats.values():
            beat.cancel()
        self._beats.clear()
        if self._opened:
            await self.backend.close()
            self._opened = False


class Tracker:
    """The blocking face of [`AsyncTracker`][anarchon.tracking.AsyncTracker], for worker signal
    handlers."""

    def __init__(self, backend: Backend, **options: Any) -> None:
        self.core = AsyncTracker(backend, **options)
        self._portal = Portal("anarchon-tracker")

    def begin(self, token: RunToken) -> bool:
        return self._portal.call(self.core.begin(token))

    def end(self, token: RunToken, status: RunStatus, error: str | None = None, *,
            history_size: int | None = None,
            history_ttl: DurationLike | None = None) -> bool:
        return self._portal.call(self.core.end(token, status, error,
                                               history_size=history_size,
                                               history_ttl=history_ttl))

    def note(self, token: RunToken, text: str) -> bool:
        """Attach a detail text to the still-running run; see
        [`AsyncTracker.note()`][anarchon.tracking.AsyncTracker.note]."""
        return self._portal.call(self.core.note(token, text))

    def close(self) -> None:
        if self._portal.active:
            self._portal.call(self.core.close())
        self._portal.close()
