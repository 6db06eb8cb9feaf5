"""The run context handed to every handler, and its abort signal."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from .durations import DurationLike, parse_duration
from .engine.aio import wait_event
from .errors import Aborted
from .history import RunReason

AbortReason = Literal["stop", "timeout", "lost"]


class AbortSignal:
    """Tells a handler to stop: on ``stop()``, on ``timeout``, or when a backup took over.

    Sync handlers poll `aborted` or sleep with `wait()`; async handlers use
    `wait_async()` (their task is also cancelled on abort).
    """

    def __init__(self) -> None:
        self._event = threading.Event()
        self._reason: AbortReason | None = None
        self._callbacks: list[Callable[[], object]] = []
        self._async_waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = []
        self._lock = threading.Lock()

    @property
    def aborted(self) -> bool:
        """True once the run has been told to stop."""
        return self._event.is_set()

    @property
    def reason(self) -> AbortReason | None:
        """``"stop"``, ``"timeout"`` or ``"lost"`` once aborted, else ``None``."""
        return self._reason

    def raise_if_aborted(self) -> None:
        """Raise [`anarchon.Aborted`][anarchon.Aborted] if the signal is aborted."""
        if self._reason is not None:
            raise Aborted(self._reason)

    def wait(self, seconds: float | None = None) -> bool:
        """Sleep up to ``seconds``; return early with ``True`` if aborted meanwhile."""
        return self._event.wait(seconds)

    async def wait_async(self, seconds: float | None = None) -> bool:
        """The awaitable twin of `wait()`."""
        if self.aborted:
            return True
        event = asyncio.Event()
        loop = asyncio.get_running_loop()
        with self._lock:
            if self.aborted:
                return True
            self._async_waiters.append((loop, event))
        try:
            await wait_event(event, seconds)
        finally:
            with self._lock:
                if (loop, event) in self._async_waiters:
                    self._async_waiters.remove((loop, event))
        return self.aborted

    def on_abort(self, callback: Callable[[], object]) -> None:
        """Call ``callback`` (on the aborting thread) when the signal aborts."""
        with self._lock:
            if not self.aborted:
                self._callbacks.append(callback)
                return
        callback()

    def abort(self, reason: AbortReason) -> bool:
        """Abort with ``reason``; returns False if it was already aborted."""
        with self._lock:
            if self._reason is not None:
                return False
            self._reason = reason
            self._event.set()
            callbacks, self._callbacks = self._callbacks, []
            waiters, self._async_waiters = self._async_waiters, []
        for loop, event in waiters:
            loop.call_soon_threadsafe(event.set)
        for callback in callbacks:
            callback()
        return True


@dataclass(frozen=True)
class RunToken:
    """One attempt, for whoever finishes it in another process (a task queue worker).

    ``owner`` fences every write: a token of a replaced attempt can change nothing.
    """

    name: str
    slot: int
    attempt: int
    owner: str

    def to_headers(self) -> dict[str, str | int]:
        """The ``anarchon_*`` message headers that carry this token."""
        return {"anarchon_job": self.name, "anarchon_slot": self.slot,
                "anarchon_attempt": self.attempt, "anarchon_owner": self.owner}

    @classmethod
    def from_headers(cls, headers: Mapping[str, Any] | None) -> RunToken | None:
        """Read a token back from message headers; ``None`` if they carry none."""
        if not headers or "anarchon_job" not in headers:
            return None
        try:
            return cls(str(headers["anarchon_job"]), int(headers["anarchon_slot"]),
                       int(headers["anarchon_attempt"]), str(headers["anarchon_owner"]))
        except (KeyError, TypeError, ValueError):
            return None


@dataclass(frozen=True)
class RunContext:
    """What a handler knows about its run.

    ``(slot, attempt)`` is the fencing token: pass it to downstream writes so a stale
    attempt's late write can be recognised and refused.
    """

    name: str
    slot: int
    scheduled_at: datetime
    instance_id: str
    manual: bool
    attempt: int
    reason: RunReason
    signal: AbortSignal
    data: Any
    #: a dynamic job's stored params (JSON; see ``add_job()``), else ``None``
    params: Any = None
    _detached: dict[str, float] = field(default_factory=dict, init=False, repr=False,
                                        compare=False)

    def detach(self, lease: DurationLike = "10m") -> RunToken:
        """Leave the run open when the handler returns: something else finishes it.

        Used by task-queue integrations: the handler enqueues a message carrying the
        token's headers, and a worker finishes the run with [`anarchon.Tracker`][anarchon.Tracker].
        The lease is set to ``lease`` (time allowed in the queue); if nobody renews or
        finishes it by then, a backup takes the slot over as a new attempt.
        """
        if self.manual:
            raise RuntimeError("a manual run cannot be detached")
        self._detached["lease"] = parse_duration(lease, option="lease")
        return self.token

    @property
    def token(self) -> RunToken:
        """This attempt's fencing token: ``(name, slot, attempt, owner)``."""
        return RunToken(self.name, self.slot, self.attempt, self.instance_id)

    @property
    def detached_lease(self) -> float | None:
        """The lease set by `detach()`, or ``None`` if the run was not detached."""
        return self._detached.get("lease")
