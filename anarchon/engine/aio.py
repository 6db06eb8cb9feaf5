"""asyncio helpers that never swallow a cancellation.

Python 3.11's ``asyncio.wait_for`` can lose the caller's cancellation when it arrives as
the inner awaitable finishes, leaving a task "cancelling" forever (seen here as a
``stop()`` that never returned); these use ``asyncio.wait``, which does not.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Iterable
from typing import Any, TypeVar

T = TypeVar("T")

logger = logging.getLogger("anarchon")

#: how often `cancel_and_wait()` cancels a task again that is still running
RECANCEL_EVERY = 0.1


async def within(awaitable: Awaitable[T], timeout: float | None) -> T:
    """Await ``awaitable`` for at most ``timeout`` seconds (``TimeoutError`` after)."""
    task = asyncio.ensure_future(awaitable)
    try:
        done, _ = await asyncio.wait({task}, timeout=timeout)
    except asyncio.CancelledError:
        task.cancel()
        raise
    if not done:
        task.cancel()
        raise asyncio.TimeoutError()
    return task.result()


async def wait_event(event: asyncio.Event, timeout: float | None) -> bool:
    """Wait until ``event`` is set or ``timeout`` passes; True if it was set."""
    try:
        await within(event.wait(), timeout)
    except asyncio.TimeoutError:
        return False
    return True


async def cancel_and_wait(tasks: Iterable[asyncio.Future[Any]], timeout: float = 5.0
                          ) -> set[asyncio.Future[Any]]:
    """Cancel ``tasks`` and wait until they end; returns those still running after
    ``timeout`` seconds (logged, then left alone).

    A task still running after a cancellation is cancelled again every
    `RECANCEL_EVERY` seconds: a library that swallows one cancellation (seen with
    redis-py's pub/sub read on Python 3.11) gets another at its next ``await`` instead of
    blocking the caller for ever. Their exceptions are retrieved (never "never retrieved").
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    pending = {task for task in tasks if not task.done()}
    everything = set(tasks) | pending
    while pending:
        for task in pending:
            task.cancel()
        left = deadline - loop.time()
        if left <= 0:
            logger.warning("%d task(s) ignored cancellation for %gs; left running: %s",
                           len(pending), timeout, ", ".join(sorted(map(repr, pending)))[:500])
            break
        _, pending = await asyncio.wait(pending, timeout=min(RECANCEL_EVERY, left))
    for task in everything:
        if task.done() and not task.cancelled():
            task.exception()  # mark it retrieved
    return pending


def log_crash(task: asyncio.Task[Any]) -> None:
    """Done callback of an internal task: its exception is logged at ERROR."""
    if not task.cancelled() and task.exception() is not None:
        logger.error("anarchon internal task failed", exc_info=task.exception())


def gathered(value: T | BaseException) -> T | Exception:
    """One ``gather(return_exceptions=True)`` answer; cancellation and exits propagate."""
    if isinstance(value, BaseException) and not isinstance(value, Exception):
        raise value
    return value
