"""LeaseKeeper: a lease write outside the beat waits for the renewal in flight."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from anarchon.backends.base import HeartbeatResult, HeldRun, RunKey
from anarchon.context import AbortSignal
from anarchon.engine.lease_keeper import Held, LeaseKeeper
from tests.support import run


class SlowHeartbeats:
    """Just enough of a LeaseBackend: each heartbeat waits until ``reply`` is set."""

    def __init__(self) -> None:
        self.reply = asyncio.Event()
        self.in_flight = asyncio.Event()
        self.sent: list[list[HeldRun]] = []

    async def heartbeat(self, owner: str, held: Sequence[HeldRun], watched: Sequence[RunKey],
                        lease_ms: int) -> HeartbeatResult:
        self.sent.append(list(held))
        self.in_flight.set()
        await self.reply.wait()
        return HeartbeatResult(lost=frozenset(), watched=[])


def test_a_write_under_renewing_waits_for_the_beat_in_flight() -> None:
    async def body() -> None:
        backend = SlowHeartbeats()
        keeper = LeaseKeeper(backend, "me", 2.0, 0.3,  # type: ignore[arg-type]
                             on_lost=lambda held: None, on_expired=lambda state: None,
                             on_error=lambda exc: None)
        run_ = HeldRun("job", 1000, 1)
        keeper.hold(Held(run_, AbortSignal()))
        beat = asyncio.ensure_future(keeper.beat())
        await backend.in_flight.wait()  # the renewal (with our run in it) is in flight
        keeper.drop(run_.key)
        order: list[str] = []

        async def detach() -> None:
            async with keeper.renewing:
                order.append("detach")

        writer = asyncio.ensure_future(detach())
        await asyncio.sleep(0.05)
        assert order == []  # still waiting for the renewal in flight
        backend.reply.set()
        await asyncio.gather(beat, writer)
        order.append("after")
        assert order == ["detach", "after"]
        await keeper.beat()  # the next beat has nothing to renew: no store call
        assert backend.sent == [[run_]]

    run(body())
