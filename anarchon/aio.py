"""asyncio helpers that never swallow a cancellation.

Python 3.11's ``asyncio.wait_for`` can lose the caller's cancellation when it arrives as
the inner awaitable finishes, leaving a task "cancelling" forever (seen here as a
``stop()`` that never returned); these use ``asyncio.wait``, which does not.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")


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
