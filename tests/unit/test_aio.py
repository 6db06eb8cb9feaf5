"""anarchon.engine.aio: waiting and cancelling without losing (or hanging on) a cancellation."""

from __future__ import annotations

import asyncio

from anarchon.engine.aio import cancel_and_wait, wait_event, within
from tests.support import run


async def _swallows_one_cancellation(entered: asyncio.Event) -> str:
    """Like a library that catches one CancelledError and goes back to reading."""
    entered.set()
    try:
        await asyncio.Event().wait()
    except asyncio.CancelledError:
        pass
    await asyncio.Event().wait()  # only a second cancellation ends this
    return "unreachable"


def test_cancel_and_wait_cancels_again_a_task_that_swallowed_the_first() -> None:
    async def body() -> None:
        entered = asyncio.Event()
        stubborn = asyncio.ensure_future(_swallows_one_cancellation(entered))
        plain = asyncio.ensure_future(asyncio.sleep(60))
        await entered.wait()
        left = await within(cancel_and_wait([stubborn, plain], timeout=5), 3)
        assert left == set()
        assert stubborn.cancelled() and plain.cancelled()

    run(body())


def test_cancel_and_wait_gives_up_after_its_timeout_and_retrieves_errors() -> None:
    async def never_ends() -> None:
        while True:
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                continue

    async def failed() -> None:
        raise RuntimeError("boom")

    async def body() -> None:
        immortal = asyncio.ensure_future(never_ends())
        broken = asyncio.ensure_future(failed())
        await asyncio.sleep(0)
        left = await cancel_and_wait([immortal, broken], timeout=0.3)
        assert left == {immortal}
        assert isinstance(broken.exception(), RuntimeError)
        assert not immortal.done()

    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(body())
    finally:
        loop.close()


def test_wait_event_reports_whether_the_event_was_set() -> None:
    async def body() -> None:
        event = asyncio.Event()
        assert await wait_event(event, 0.01) is False
        event.set()
        assert await wait_event(event, 1) is True

    run(body())
