"""The claim/finish batcher's pure logic (no store): grouping, answers, errors, grid."""

from __future__ import annotations

import asyncio

import pytest

from anarchon.engine.batcher import Batcher, chunks, on_grid, settle


def test_chunks_keep_order_and_bound_size() -> None:
    assert chunks([1, 2, 3, 4, 5], 2) == [[1, 2], [3, 4], [5]]
    assert chunks([], 3) == []
    assert chunks([1], 1) == [[1]]
    with pytest.raises(ValueError, match="at least 1"):
        chunks([1], 0)


def test_on_grid_rounds_up_and_respects_the_cap() -> None:
    assert on_grid(0.0, 5) == 0.0
    assert on_grid(0.2, 5) == 5.0
    assert on_grid(5.0, 5) == 5.0
    assert on_grid(5.000000001, 5) == 5.0  # float noise does not push a value a step up
    assert on_grid(12.3, 5) == 15.0
    assert on_grid(498.0, 5, cap_ms=499.0) == 499.0  # never beyond the configured jitter
    assert on_grid(3.3, 0) == 3.3


def test_settle_gives_each_future_its_answer() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        futures: list[asyncio.Future[int]] = [loop.create_future() for _ in range(3)]
        boom = ValueError("item 2")
        answers: list[int | Exception] = [1, boom, 3]
        settle(futures, answers)
        assert futures[0].result() == 1
        assert futures[1].exception() is boom
        assert futures[2].result() == 3

    asyncio.run(main())


def test_settle_a_wrong_length_reply_fails_every_item() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        futures: list[asyncio.Future[int]] = [loop.create_future() for _ in range(2)]
        settle(futures, [1])
        for future in futures:
            assert isinstance(future.exception(), RuntimeError)

    asyncio.run(main())


def test_settle_skips_cancelled_waiters() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        futures: list[asyncio.Future[int]] = [loop.create_future() for _ in range(2)]
        futures[0].cancel()
        settle(futures, [1, 2])
        assert futures[0].cancelled()
        assert futures[1].result() == 2

    asyncio.run(main())


class Recorder:
    """A ``send`` that records each call's items and answers ``item * 10``."""

    def __init__(self, fail: BaseException | None = None) -> None:
        self.calls: list[list[int]] = []
        self.fail = fail

    async def __call__(self, items: list[int]) -> list[int | Exception]:
        self.calls.append(list(items))
        await asyncio.sleep(0)
        if self.fail is not None:
            raise self.fail
        return [ValueError(f"bad {i}") if i < 0 else i * 10 for i in items]


def test_items_submitted_in_one_turn_go_in_one_call() -> None:
    async def main() -> None:
        send = Recorder()
        batcher: Batcher[int, int] = Batcher(send)
        answers = await asyncio.gather(*(batcher.submit(i) for i in range(50)))
        assert answers == [i * 10 for i in range(50)]
        assert send.calls == [list(range(50))]
        assert (batcher.calls, batcher.items, batcher.pending) == (1, 50, 0)

    asyncio.run(main())


def test_a_lone_item_is_one_call_without_a_timer() -> None:
    async def main() -> None:
        send = Recorder()
        batcher: Batcher[int, int] = Batcher(send)
        turns = 0

        async def count_turns() -> None:
            nonlocal turns
            while True:
                turns += 1
                await asyncio.sleep(0)

        counter = asyncio.ensure_future(count_turns())
        await asyncio.sleep(0)
        turns = 0
        assert await batcher.submit(7) == 70
        assert turns <= 5, turns  # answered within a few turns of the loop: no timer waited
        counter.cancel()
        assert await batcher.submit(8) == 80
        assert send.calls == [[7], [8]]  # later items form new batches

    asyncio.run(main())


def test_large_batches_are_split() -> None:
    async def main() -> None:
        send = Recorder()
        batcher: Batcher[int, int] = Batcher(send, max_size=4)
        answers = await asyncio.gather(*(batcher.submit(i) for i in range(10)))
        assert answers == [i * 10 for i in range(10)]
        assert send.calls == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]

    asyncio.run(main())


def test_a_window_collects_items_submitted_later() -> None:
    async def main() -> None:
        send = Recorder()
        batcher: Batcher[int, int] = Batcher(send, window=0.05)

        async def later(i: int, delay: float) -> int:
            await asyncio.sleep(delay)
            return await batcher.submit(i)

        answers = await asyncio.gather(later(1, 0), later(2, 0.01), later(3, 0.2))
        assert list(answers) == [10, 20, 30]
        assert send.calls == [[1, 2], [3]]

    asyncio.run(main())


def test_per_item_errors_reach_only_their_item() -> None:
    async def main() -> None:
        batcher: Batcher[int, int] = Batcher(Recorder())
        answers = await asyncio.gather(batcher.submit(1), batcher.submit(-1),
                                       return_exceptions=True)
        assert answers[0] == 10
        assert isinstance(answers[1], ValueError)

    asyncio.run(main())


def test_a_failed_call_fails_every_item_of_it() -> None:
    async def main() -> None:
        batcher: Batcher[int, int] = Batcher(Recorder(fail=ConnectionError("down")))
        answers = await asyncio.gather(*(batcher.submit(i) for i in range(3)),
                                       return_exceptions=True)
        assert all(isinstance(a, ConnectionError) for a in answers)

    asyncio.run(main())


def test_a_cancelled_waiter_is_not_sent() -> None:
    async def main() -> None:
        send = Recorder()
        batcher: Batcher[int, int] = Batcher(send)
        doomed = asyncio.ensure_future(batcher.submit(1))
        kept = asyncio.ensure_future(batcher.submit(2))
        await asyncio.sleep(0)  # both queued, flush scheduled
        doomed.cancel()
        assert await kept == 20
        assert send.calls == [[2]]

    asyncio.run(main())


def test_bad_options_are_refused() -> None:
    with pytest.raises(ValueError, match="window"):
        Batcher(Recorder(), window=-1)
    with pytest.raises(ValueError, match="max_size"):
        Batcher(Recorder(), max_size=0)


def test_aclose_cancels_queued_and_in_flight_calls_and_refuses_more() -> None:
    async def main() -> None:
        release = asyncio.Event()
        sent: list[list[int]] = []

        async def slow(items: list[int]) -> list[int | Exception]:
            sent.append(items)
            await release.wait()
            return list(items)

        batcher: Batcher[int, int] = Batcher(slow)
        in_flight = asyncio.ensure_future(batcher.submit(1))
        await asyncio.sleep(0.01)  # flushed: the call waits on the store
        assert sent == [[1]]
        windowed: Batcher[int, int] = Batcher(slow, window=10)
        queued = asyncio.ensure_future(windowed.submit(2))
        await asyncio.sleep(0)
        await batcher.aclose()
        await windowed.aclose()
        await asyncio.sleep(0)
        assert in_flight.cancelled() and queued.cancelled()
        assert sent == [[1]]  # the queued item was never sent
        with pytest.raises(RuntimeError, match="closed"):
            await batcher.submit(3)
        await batcher.aclose()  # twice is fine

    asyncio.run(main())


def test_send_all_answers_in_order_in_calls_of_max_size() -> None:
    async def main() -> None:
        calls: list[list[int]] = []

        async def send(items: list[int]) -> list[int | Exception]:
            calls.append(items)
            if 5 in items:
                raise ConnectionError("store down")
            if 7 in items:
                return [0]  # a reply of the wrong length
            return [i * 10 if i != 2 else ValueError("two") for i in items]

        batcher: Batcher[int, int] = Batcher(send, max_size=2)
        answers = await batcher.send_all([1, 2, 3, 4, 5, 6, 7, 8])
        assert sorted(calls) == [[1, 2], [3, 4], [5, 6], [7, 8]]
        assert answers[:4] == [10, answers[1], 30, 40]
        assert isinstance(answers[1], ValueError)  # that item alone failed
        assert [type(a) for a in answers[4:]] == [ConnectionError, ConnectionError,
                                                  RuntimeError, RuntimeError]
        assert "answered 1 item(s) for 2" in str(answers[6])
        assert (batcher.calls, batcher.items) == (4, 8)
        calls.clear()
        assert await batcher.send_all([3]) == [30] and calls == [[3]]  # one call, no task
        await batcher.aclose()
        with pytest.raises(RuntimeError, match="closed"):
            await batcher.send_all([1])

    asyncio.run(main())


def test_send_all_is_cancelled_with_its_caller() -> None:
    async def main() -> None:
        started = asyncio.Event()

        async def send(items: list[int]) -> list[int]:
            started.set()
            await asyncio.sleep(3600)
            return items

        for size in (1, 5):  # one call awaited inline, and calls gathered
            batcher: Batcher[int, int] = Batcher(send, max_size=2)
            started.clear()
            caller = asyncio.ensure_future(batcher.send_all(list(range(size))))
            await started.wait()
            caller.cancel()
            with pytest.raises(asyncio.CancelledError):
                await caller

    asyncio.run(main())
