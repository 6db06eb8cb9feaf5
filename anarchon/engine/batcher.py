"""Batching of store calls that fall due together (claims and finishes).

Many jobs share a slot (``every 1s`` jobs all fire on the second), so one instance often
has hundreds of claims to send within a few milliseconds. A `Batcher` collects the
items submitted during one turn of the event loop (or within ``window`` seconds of the
first) and sends them to the store in one call; each submitter awaits its own answer.

The engine's planner wakes once for every job whose ``slot + jitter`` falls due and
sends their claims at once (`Batcher.send_all()`); each job's jitter is rounded up
to a small grid (`on_grid()`, never beyond the job's ``jitter``) so that jobs due
within one grid step fall due together. Claims that do not come from the planner
(catch-up, takeovers) and finishes are collected per loop turn (`Batcher.submit()`).
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

from ..backends.base import Backend, ClaimRequest, ClaimResult, Finish
from ..backends.capabilities import BatchStore
from .aio import cancel_and_wait

T = TypeVar("T")
R = TypeVar("R")

#: items per store call; a larger batch is split into calls sent concurrently (a Redis
#: script blocks the server while it runs, so one call must stay short)
DEFAULT_MAX_SIZE = 200


def chunks(items: Sequence[T], size: int) -> list[list[T]]:
    """``items`` cut into consecutive lists of at most ``size`` (order kept)."""
    if size < 1:
        raise ValueError(f"chunk size must be at least 1, got {size}")
    return [list(items[i:i + size]) for i in range(0, len(items), size)]


def on_grid(value_ms: float, step_ms: float, cap_ms: float | None = None) -> float:
    """``value_ms`` rounded up to a multiple of ``step_ms``, never above ``cap_ms``.

    Used on a job's jitter draw so that jobs due in the same step wake on the same loop
    turn; with ``cap_ms`` the configured jitter stays an upper bound. ``step_ms <= 0``
    leaves the value unchanged.
    """
    if step_ms <= 0:
        return value_ms
    rounded = float(math.ceil(value_ms / step_ms - 1e-9) * step_ms)
    if cap_ms is not None:
        rounded = min(rounded, max(cap_ms, value_ms))
    return rounded


def settle(futures: Sequence[asyncio.Future[R]],
           answers: Sequence[R | Exception] | BaseException) -> None:
    """Hand each waiting future its answer: the i-th answer to the i-th future, or the
    same exception to all (a failed call, or a reply of the wrong length). Futures already
    done (their waiter was cancelled) are left alone."""
    if not isinstance(answers, BaseException) and len(answers) != len(futures):
        answers = _miscounted(len(answers), len(futures))
    for index, future in enumerate(futures):
        if future.done():
            continue
        answer = answers if isinstance(answers, BaseException) else answers[index]
        if isinstance(answer, BaseException):
            future.set_exception(answer)
        else:
            future.set_result(answer)


def _miscounted(answered: int, sent: int) -> RuntimeError:
    return RuntimeError(f"batched store call answered {answered} item(s) for {sent}")


class Batcher(Generic[T, R]):
    """Sends items submitted together as one call of ``send``.

    ``send(items)`` returns one answer per item, in order: a value, or an exception for
    that item alone; if ``send`` raises, every item of the call gets that exception.
    The first item of a batch schedules the call for the loop's next turn (``window=0``)
    or ``window`` seconds later; items submitted meanwhile join it, up to ``max_size``
    per call (more are split into calls sent concurrently).
    """

    def __init__(self, send: Callable[[list[T]], Awaitable[Sequence[R | Exception]]], *,
                 window: float = 0.0, max_size: int = DEFAULT_MAX_SIZE) -> None:
        if window < 0:
            raise ValueError(f"window must not be negative, got {window}")
        if max_size < 1:
            raise ValueError(f"max_size must be at least 1, got {max_size}")
        self._send = send
        self.window = window
        self.max_size = max_size
        self._items: list[T] = []
        self._futures: list[asyncio.Future[R]] = []
        self._scheduled = False
        self._timer: asyncio.TimerHandle | asyncio.Handle | None = None
        self._calls: set[asyncio.Task[None]] = set()
        self._closed = False
        #: number of store calls made and items sent (for tests and benchmarks)
        self.calls = 0
        self.items = 0

    @property
    def pending(self) -> int:
        """Items waiting for the next flush."""
        return len(self._items)

    async def submit(self, item: T) -> R:
        """Queue ``item`` for the next call and wait for its own answer."""
        if self._closed:
            raise RuntimeError("batcher is closed: nothing more is sent to the store")
        loop = asyncio.get_running_loop()
        future: asyncio.Future[R] = loop.create_future()
        self._items.append(item)
        self._futures.append(future)
        if not self._scheduled:
            self._scheduled = True
            if self.window > 0:
                self._timer = loop.call_later(self.window, self._flush)
            else:
                self._timer = loop.call_soon(self._flush)
        return await future

    async def send_all(self, items: Sequence[T]) -> list[R | Exception]:
        """Send ``items`` now, gathered by the caller, and return one answer per item in
        order (a value, or the exception for that item); calls of at most ``max_size``
        items are sent concurrently. Cancelling the caller cancels the calls."""
        if self._closed:
            raise RuntimeError("batcher is closed: nothing more is sent to the store")
        parts = chunks(items, self.max_size)
        self.calls += len(parts)
        self.items += len(items)
        if len(parts) == 1:  # the usual case: no task per call
            try:
                replies: list[Sequence[R | Exception] | BaseException] = [
                    await self._send(parts[0])]
            except Exception as exc:
                replies = [exc]
        else:
            replies = list(await asyncio.gather(*(self._send(part) for part in parts),
                                                return_exceptions=True))
        answers: list[R | Exception] = []
        for part, reply in zip(parts, replies, strict=True):
            if isinstance(reply, BaseException) and not isinstance(reply, Exception):
                raise reply  # a cancellation: nothing was answered
            if not isinstance(reply, BaseException) and len(reply) != len(part):
                reply = _miscounted(len(reply), len(part))
            answers.extend([reply] * len(part) if isinstance(reply, Exception) else reply)
        return answers

    async def aclose(self) -> None:
        """Send nothing more: drop queued items (their waiters are cancelled) and cancel
        calls in flight, as cancelling a single store call would. Safe to call twice."""
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        for future in self._futures:
            future.cancel()
        self._items, self._futures, self._scheduled = [], [], False
        await cancel_and_wait(list(self._calls))

    def _flush(self) -> None:
        items, futures = self._items, self._futures
        self._items, self._futures, self._scheduled = [], [], False
        self._timer = None
        live = [(i, f) for i, f in zip(items, futures, strict=True) if not f.done()]
        calls = [asyncio.ensure_future(self._call([i for i, _ in part], [f for _, f in part]))
                 for part in chunks(live, self.max_size)]
        self._calls.update(calls)  # keep a reference until each call is done
        for call in calls:
            call.add_done_callback(self._calls.discard)

    async def _call(self, items: list[T], futures: list[asyncio.Future[R]]) -> None:
        self.calls += 1
        self.items += len(items)
        try:
            answers = await self._send(items)
        except asyncio.CancelledError:
            for future in futures:
                future.cancel()
            raise
        except Exception as exc:
            settle(futures, exc)
        else:
            settle(futures, answers)


__all__ = ["DEFAULT_MAX_SIZE", "Batcher", "chunks", "on_grid", "settle"]


class StoreCalls:
    """The claim and finish calls of one backend: batched or not is decided here, once.

    A ``BatchStore`` (``anarchon.backends.capabilities``)
    gets its claims and finishes through ``Batcher`` s (one store call for the items
    due together) and its jobs' jitter on the claim grid; any other backend gets one call
    per item and no grid.
    """

    def __init__(self, backend: Backend, *, window: float, grid_ms: float) -> None:
        self.backend = backend
        self.batched = isinstance(backend, BatchStore)
        #: the grid each job's jitter is rounded up to (0: no grid)
        self.grid_ms = grid_ms if self.batched else 0.0
        self.claims: Batcher[ClaimRequest, ClaimResult] = Batcher(
            lambda requests: backend.claim_many(requests), window=window)
        self.finishes: Batcher[Finish, bool] = Batcher(
            lambda finishes: backend.finish_many(finishes), window=window)

    async def claim(self, request: ClaimRequest) -> ClaimResult:
        """Claim one slot (with the other claims of this loop turn, if batched)."""
        if self.batched:
            return await self.claims.submit(request)
        return await self.backend.claim(request)

    async def claim_all(self, requests: list[ClaimRequest]
                        ) -> list[ClaimResult | Exception]:
        """Claim slots that fell due together, in as few calls as the backend allows."""
        return await self.claims.send_all(requests)

    async def finish(self, finish: Finish) -> bool:
        """Record one outcome (with the other finishes of this loop turn, if batched)."""
        if self.batched:
            return await self.finishes.submit(finish)
        return await self.backend.finish(finish)

    async def aclose(self) -> None:
        """Cancel batched calls still in flight."""
        await self.claims.aclose()
        await self.finishes.aclose()
