"""Shared values (``read_value`` / ``swap_value`` in anarchon/backends/base.py) on every
lease store: compare-and-set with exactly one winner among instances that read alike."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from ..backends.base import Backend
from ..backends.capabilities import ValueStore
from .support import run


async def opened(backend_factory: Callable[[], Backend]) -> ValueStore:
    backend = backend_factory()
    await backend.open()
    assert isinstance(backend, ValueStore)
    return backend


def test_swap_is_compare_and_set(backend_factory: Callable[[], Backend]) -> None:
    async def scenario() -> None:
        backend = await opened(backend_factory)
        assert await backend.read_value("job", "last") is None
        assert not await backend.swap_value("job", "last", "1000", "2000")  # nothing yet
        assert await backend.swap_value("job", "last", None, "1000")
        assert not await backend.swap_value("job", "last", None, "1500")  # not new any more
        assert await backend.read_value("job", "last") == "1000"
        assert not await backend.swap_value("job", "last", "999", "2000")  # stale
        assert await backend.swap_value("job", "last", "1000", "2000")
        assert await backend.read_value("job", "last") == "2000"
        # fields and jobs are separate; names with odd characters stay apart
        assert await backend.read_value("job", "other") is None
        assert await backend.read_value("job:{x}%", "last") is None
        assert await backend.swap_value("job:{x}%", "last", None, "é \x01 {json: 1}")
        assert await backend.read_value("job:{x}%", "last") == "é \x01 {json: 1}"
        await backend.close()

    run(scenario())


def test_one_winner_among_concurrent_swaps(backend_factory: Callable[[], Backend]) -> None:
    async def scenario() -> None:
        backends = [await opened(backend_factory) for _ in range(5)]
        for round_, expected in enumerate((None, "r0")):
            results = await asyncio.gather(*(
                b.swap_value("job", "last", expected, f"r{round_ + 1}-{n}" if round_ else
                             "r0") for n, b in enumerate(backends)))
            assert sorted(results) == [False] * 4 + [True], results
        winner = await backends[0].read_value("job", "last")
        assert winner is not None and winner.startswith("r2-")
        for backend in backends:
            await backend.close()

    run(scenario())


def test_a_scheduler_that_never_starts_reads_and_swaps(
        backend_factory: Callable[[], Backend]) -> None:
    """``Scheduler.read_value``/``swap_value`` connect on demand (a Celery worker reports a
    manual run's outcome with a scheduler it never starts)."""
    from anarchon import Scheduler

    first, second = Scheduler(backend_factory()), Scheduler(backend_factory())
    try:
        assert first.read_value("job", "v") is None
        assert first.swap_value("job", "v", None, "1")
        assert second.read_value("job", "v") == "1"
        assert second.swap_value("job", "v", "1", "2")
        assert first.read_value("job", "v") == "2"
    finally:
        first.close()
        second.close()
