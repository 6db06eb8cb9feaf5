"""The local lease deadline (anarchon.engine.deadlines): a held run is aborted at the send time of
the last renewal the store confirmed + lease - margin, by a timer no store call delays.

The rules are checked on a fake clock (``Deadlines.due``); the keeper against a silent
store (a heartbeat that never answers) and one that blocks the keeper's event loop, on
the real clock, with bounds well above the timings they check.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

import pytest

from anarchon.backends.base import HeartbeatResult, HeldRun, RunKey
from anarchon.context import AbortSignal
from anarchon.engine.deadlines import Deadlines, safety_margin
from anarchon.engine.lease_keeper import CALL_FRACTION, Held, LeaseKeeper
from tests.support import run


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _held(name: str, renewed_at: float) -> Held:
    return Held(HeldRun(name, 1000, 1), AbortSignal(), renewed_at)


@pytest.mark.parametrize(("lease", "margin"), [(1.0, 0.2), (3.0, 0.2), (10.0, 0.2),
                                               (30.0, 0.6), (300.0, 6.0), (0.4, 0.1)])
def test_the_margin_is_two_percent_at_least_a_fifth_of_a_second_at_most_a_quarter_lease(
        lease: float, margin: float) -> None:
    assert safety_margin(lease) == pytest.approx(margin)


def test_due_at_the_last_confirmed_send_time_plus_lease_minus_margin() -> None:
    clock = FakeClock()
    runs: dict[RunKey, Held] = {}
    aborted: list[Held] = []
    deadlines = Deadlines(runs, 3.0, aborted.append, monotonic=clock)
    a, b = _held("a", 100.0), _held("b", 101.0)
    runs.update({a.run.key: a, b.run.key: b})
    assert deadlines.deadline(a) == pytest.approx(102.8)
    clock.now = 102.79
    assert deadlines.check() == pytest.approx(102.8)
    assert aborted == []
    clock.now = 102.8  # exactly at the deadline: due
    assert deadlines.check() == pytest.approx(103.8)
    assert aborted == [a]
    b.renewed_at = 102.5  # a renewal sent then was confirmed: b's deadline moves
    clock.now = 104.0
    expired, following = deadlines.due(clock.now)
    assert expired == [a] and following == pytest.approx(105.3)


def test_finishing_and_dropped_runs_are_not_aborted() -> None:
    clock = FakeClock()
    runs: dict[RunKey, Held] = {}
    deadlines = Deadlines(runs, 2.0, lambda held: None, monotonic=clock)
    finishing, dropped = _held("f", 0.0), _held("d", 0.0)
    finishing.finishing, dropped.renewing = True, False
    runs.update({finishing.run.key: finishing, dropped.run.key: dropped})
    assert deadlines.due(1000.0) == ([], None)


class SilentStore:
    """Heartbeats that are never answered (a partitioned network); ``block`` also blocks
    the caller's event loop for that long in each call (a driver doing blocking I/O)."""

    def __init__(self, block: float = 0.0) -> None:
        self.block = block
        self.calls: list[float] = []
        self.cancelled = 0

    async def heartbeat(self, owner: str, held: Sequence[HeldRun], watched: Sequence[RunKey],
                        lease_ms: int) -> HeartbeatResult:
        self.calls.append(time.monotonic())
        if self.block:
            time.sleep(self.block)  # noqa: ASYNC251 - the fault: it blocks the loop
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        raise AssertionError("unreachable")


@pytest.mark.parametrize("block", [0.0, 1.5], ids=["silent", "blocks-the-loop"])
def test_a_run_is_aborted_at_its_deadline_whatever_the_heartbeat_does(block: float) -> None:
    lease, heartbeat = 1.0, 0.2
    store = SilentStore(block)

    async def body() -> None:
        lost: list[float] = []
        fired: list[float] = []
        keeper = LeaseKeeper(store, "me", lease, heartbeat,  # type: ignore[arg-type]
                             on_lost=lambda held: lost.append(time.monotonic()),
                             on_expired=lambda state: None, on_error=lambda exc: None)
        held = _held("job", time.monotonic())
        held.signal.on_abort(lambda: fired.append(time.monotonic()))
        keeper.hold(held)
        expected = keeper.deadlines.deadline(held)
        beats = asyncio.ensure_future(keeper.run())
        try:
            while not lost:
                assert time.monotonic() < expected + 5, "never reported lost"
                await asyncio.sleep(0.02)
        finally:
            beats.cancel()
            await asyncio.gather(beats, return_exceptions=True)
        assert held.signal.reason == "lost" and not held.renewing
        # on the timer's thread, at the deadline, even while the loop was blocked
        assert expected <= fired[0] < expected + 0.25, fired[0] - expected
        assert expected - held.renewed_at == pytest.approx(lease - safety_margin(lease))

    run(body())
    if not store.block:  # the first call was given up after CALL_FRACTION of a heartbeat
        assert store.cancelled >= 2
        assert store.calls[1] - store.calls[0] < heartbeat * CALL_FRACTION + heartbeat + 0.15


def test_a_call_never_waits_past_the_earliest_deadline() -> None:
    keeper = LeaseKeeper(SilentStore(), "me", 3.0, 1.0,  # type: ignore[arg-type]
                         on_lost=lambda held: None, on_expired=lambda state: None,
                         on_error=lambda exc: None)
    soon, later = _held("soon", 10.0), _held("later", 12.0)
    # soon's deadline is 12.8: a call sent at 12.5 may take 0.3 s, not 0.8 s
    assert keeper.call_timeout([soon, later], 12.5) == pytest.approx(0.3)
    assert keeper.call_timeout([later], 12.5) == pytest.approx(0.8)
    # a run already past its deadline is aborted by the timer; it does not starve the call
    assert keeper.call_timeout([soon, later], 13.0) == pytest.approx(0.8)
    # slow answers earned patience: a 1.5 s round trip gets 3 s, up to the deadline
    keeper.patience = 3.0
    assert keeper.call_timeout([later], 12.5) == pytest.approx(2.3)
    assert keeper.call_timeout([], 12.5) == pytest.approx(3.0)


def test_a_renewal_confirmed_moves_the_deadline_and_a_late_answer_changes_nothing() -> None:
    class Answering:
        async def heartbeat(self, owner: str, held: Sequence[HeldRun],
                            watched: Sequence[RunKey], lease_ms: int) -> HeartbeatResult:
            return HeartbeatResult(lost=frozenset(), watched=[])

    async def body() -> None:
        keeper = LeaseKeeper(Answering(), "me", 2.0, 0.5,  # type: ignore[arg-type]
                             on_lost=lambda held: None, on_expired=lambda state: None,
                             on_error=lambda exc: None)
        held = _held("job", time.monotonic() - 1.0)
        keeper.hold(held)
        before = time.monotonic()
        await keeper.beat()
        assert held.renewed_at >= before  # the send time of the confirmed renewal
        keeper.deadline_passed(held)  # its deadline passed meanwhile: aborted, dropped
        renewed = held.renewed_at
        await keeper.beat()  # nothing renews a run aborted at its deadline
        assert held.renewed_at == renewed and held.signal.reason == "lost"

    run(body())
