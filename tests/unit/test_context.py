"""AbortSignal: the run's stop signal (docs/contract.md, *The run context*)."""

from __future__ import annotations

import asyncio
import threading
import time
from datetime import datetime, timezone

import pytest

import anarchon
from anarchon.context import AbortReason, AbortSignal

TIMEOUT = 10.0  # upper bound only; every wait here ends early


def test_fresh_signal() -> None:
    signal = AbortSignal()
    assert signal.aborted is False
    assert signal.reason is None
    signal.raise_if_aborted()  # does nothing
    assert signal.wait(0) is False
    assert signal.wait(0.0) is False


@pytest.mark.parametrize("reason", ["stop", "timeout", "lost"])
def test_abort_sets_reason_and_raise_if_aborted(reason: AbortReason) -> None:
    signal = AbortSignal()
    assert signal.abort(reason) is True
    assert signal.aborted is True
    assert signal.reason == reason
    with pytest.raises(anarchon.Aborted) as info:
        signal.raise_if_aborted()
    assert info.value.reason == reason
    assert reason in str(info.value)
    assert isinstance(info.value, anarchon.AnarchonError)
    assert signal.wait(0) is True
    assert signal.wait(TIMEOUT) is True  # returns at once


def test_abort_twice_keeps_the_first_reason() -> None:
    signal = AbortSignal()
    assert signal.abort("timeout") is True
    assert signal.abort("stop") is False
    assert signal.abort("timeout") is False
    assert signal.reason == "timeout"


def test_wait_returns_true_early_when_aborted_from_another_thread() -> None:
    signal = AbortSignal()
    timer = threading.Timer(0.02, signal.abort, args=("stop",))
    started = time.monotonic()
    timer.start()
    try:
        assert signal.wait(TIMEOUT) is True
    finally:
        timer.cancel()
    assert time.monotonic() - started < TIMEOUT / 2
    assert signal.reason == "stop"


def test_wait_async_returns_true_early_when_aborted_from_another_thread() -> None:
    signal = AbortSignal()

    async def main() -> tuple[bool, float]:
        timer = threading.Timer(0.02, signal.abort, args=("lost",))
        started = time.monotonic()
        timer.start()
        try:
            result = await signal.wait_async(TIMEOUT)
        finally:
            timer.cancel()
        return result, time.monotonic() - started

    result, elapsed = asyncio.run(main())
    assert result is True
    assert elapsed < TIMEOUT / 2
    assert signal.reason == "lost"


def test_wait_async_aborted_on_the_loop_itself() -> None:
    signal = AbortSignal()

    async def main() -> bool:
        asyncio.get_running_loop().call_soon(signal.abort, "stop")
        return await signal.wait_async(TIMEOUT)

    assert asyncio.run(main()) is True


def test_wait_async_already_aborted_and_timeout() -> None:
    aborted, idle = AbortSignal(), AbortSignal()
    aborted.abort("stop")

    async def main() -> tuple[bool, bool]:
        return await aborted.wait_async(TIMEOUT), await idle.wait_async(0)

    assert asyncio.run(main()) == (True, False)


def test_many_async_waiters_wake_together() -> None:
    signal = AbortSignal()

    async def main() -> list[bool]:
        waiters = [asyncio.ensure_future(signal.wait_async(TIMEOUT)) for _ in range(5)]
        await asyncio.sleep(0)
        signal.abort("stop")
        return list(await asyncio.gather(*waiters))

    assert asyncio.run(main()) == [True] * 5


def test_abort_after_a_timed_out_wait_async_on_a_closed_loop() -> None:
    signal = AbortSignal()

    async def main() -> bool:
        return await signal.wait_async(0.001)

    assert asyncio.run(main()) is False
    assert signal.abort("stop") is True
    assert signal.reason == "stop"


def test_on_abort_callbacks() -> None:
    signal = AbortSignal()
    calls: list[str] = []
    signal.on_abort(lambda: calls.append("first"))
    signal.on_abort(lambda: calls.append("second"))
    assert calls == []
    signal.abort("timeout")
    assert calls == ["first", "second"]
    signal.abort("stop")
    assert calls == ["first", "second"]  # never twice
    signal.on_abort(lambda: calls.append("late"))  # already aborted: called at once
    assert calls == ["first", "second", "late"]


def test_on_abort_runs_on_the_aborting_thread() -> None:
    signal = AbortSignal()
    threads: list[str] = []
    signal.on_abort(lambda: threads.append(threading.current_thread().name))
    worker = threading.Thread(target=signal.abort, args=("stop",), name="aborter")
    worker.start()
    worker.join(TIMEOUT)
    assert threads == ["aborter"]


def test_concurrent_aborts_only_one_wins() -> None:
    signal = AbortSignal()
    results: list[bool] = []
    lock = threading.Lock()
    barrier = threading.Barrier(8)

    def racer() -> None:
        barrier.wait(TIMEOUT)
        won = signal.abort("stop")
        with lock:
            results.append(won)

    workers = [threading.Thread(target=racer) for _ in range(8)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(TIMEOUT)
    assert sorted(results) == [False] * 7 + [True]


def test_run_context_is_frozen() -> None:
    ctx = anarchon.RunContext("job", 1000, datetime(1970, 1, 1, 0, 0, 1, tzinfo=timezone.utc),
                              "host:1:abc", False, 1, "scheduled", AbortSignal(), None)
    with pytest.raises(AttributeError):
        ctx.attempt = 2  # type: ignore[misc]
