"""Runtime control of ``anarchon-dramatiq`` with real brokers, the real CLI and real
processes: an actor scheduled as a dynamic job from another process, and pause, resume
and reschedule of a declared actor.

Three schedulers run the ``control`` scenario of ``app.py`` (``tick`` and ``clock`` every
1 s, the unmarked ``echo``); the test process changes the store with its own
``AsyncScheduler``. ``clock`` is never changed: its messages are the cluster's clock, so
"no message for the changed job over the next slots" is observed on slots the cluster
did schedule, not on a sleep. Timings: lease 2 s, heartbeat 0.3 s, jitter 0.1 s.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from anarchon import AsyncScheduler, from_url
from tests.harness.dramatiq.rig import Rig

T = TypeVar("T")
PARAMS = {"args": [1, "a"], "kwargs": {"tenant": 7}}


@pytest.fixture
def rig(tmp_path: Path, broker_kind: str, namespace: str, store: str) -> Iterator[Rig]:
    made = Rig(tmp_path, broker_kind, namespace, store, "control")
    yield made
    made.stop()


def control(store: str, call: Callable[[AsyncScheduler], Awaitable[T]]) -> tuple[T, float]:
    """Run one runtime-control call from this process; returns its result and when it
    returned (epoch ms)."""
    async def main() -> T:
        scheduler = AsyncScheduler(from_url(store), instance_id="test")
        try:
            return await call(scheduler)
        finally:
            await scheduler.backend.close()

    change = asyncio.run(main())
    return change, time.time() * 1000


def offered(store: str) -> dict[str, list[str]]:
    async def main() -> dict[str, list[str]]:
        scheduler = AsyncScheduler(from_url(store))
        try:
            return await scheduler.offered_handlers()
        finally:
            await scheduler.backend.close()

    return asyncio.run(main())


def sent(rig: Rig, job: str) -> list[dict[str, Any]]:
    return [r for r in rig.records("sent") if r["job"] == job]


def clock_passed(rig: Rig, at_ms: float, slots: int) -> None:
    """Wait until the cluster has sent ``clock`` for ``slots`` whole slots after
    ``at_ms``."""
    rig.wait_for(lambda _: any(r["slot"] >= at_ms + slots * 1000 for r in sent(rig, "clock")),
                 slots + 15, f"clock {slots} slots past {at_ms:.0f}")


def test_actor_as_dynamic_job_one_message_per_slot_then_removed(rig: Rig,
                                                                 store: str) -> None:
    rig.workers("w1")
    names = ["s0", "s1", "s2"]
    rig.schedulers(*names)
    rig.wait_for(lambda _: all("dramatiq:echo" in offered(store).get(n, []) for n in names),
                 15, "every scheduler offering dramatiq:echo")
    _, added_at = control(store, lambda s: s.add_job("dyn", handler="dramatiq:echo",
                                                     every=1, params=PARAMS))
    rig.wait_for(lambda _: len({r["slot"] for r in sent(rig, "dyn")}) >= 5, 20,
                 "five slots of the dynamic job sent")
    _, removed_at = control(store, lambda s: s.remove_job("dyn"))
    clock_passed(rig, removed_at, 3)
    messages = sent(rig, "dyn")
    per_slot = Counter(r["slot"] for r in messages)
    assert set(per_slot.values()) == {1}, f"a slot was sent twice: {per_slot}"
    slots = sorted(per_slot)
    assert slots == list(range(slots[0], slots[-1] + 1000, 1000)), "a slot was lost"
    assert slots[0] > added_at - 1000, (slots[0], added_at)
    late = [s for s in slots if s > removed_at]
    assert not late, f"sent after remove_job() returned at {removed_at:.0f}: {late}"
    assert all((r["actor"], r["args"], r["kwargs"], r["attempt"])
               == ("echo", [1, "a"], {"tenant": 7}, 1) for r in messages), messages
    assert {r["pid"] for r in messages} <= {rig.procs[n].pid for n in names}
    # the worker runs each message once, with the params as arguments
    rig.wait_for(lambda lines: {r["slot"] for r in lines if r["kind"] == "echo"}
                 >= set(slots), 10, "the worker to run every message")
    echoes = rig.records("echo")
    assert Counter(r["slot"] for r in echoes) == per_slot
    assert all((r["job"], r["args"], r["kwargs"]) == ("dyn", [1, "a"], {"tenant": 7})
               for r in echoes)
    first_after = min(r["t"] for r in messages) * 1000 - added_at
    print(f"dynamic job: {len(slots)} slots, {len(messages)} messages from "
          f"{len({r['pid'] for r in messages})} schedulers, 0 after remove_job(); first "
          f"message {first_after:.0f} ms after add_job() returned")


@pytest.mark.parametrize("broker_kind", ["redis"], indirect=True)
def test_pause_resume_reschedule_a_declared_actor(rig: Rig, store: str) -> None:
    rig.schedulers("s0", "s1", "s2")
    rig.wait_for(lambda _: len({r["slot"] for r in sent(rig, "tick")}) >= 2, 15,
                 "tick sent twice")

    _, paused_at = control(store, lambda s: s.pause("tick", by="test"))
    clock_passed(rig, paused_at, 3)
    after_pause = [r["slot"] for r in sent(rig, "tick") if r["slot"] > paused_at]
    assert not after_pause, f"sent after pause() returned at {paused_at:.0f}"

    _, resumed_at = control(store, lambda s: s.resume("tick"))
    rig.wait_for(lambda _: [r for r in sent(rig, "tick") if r["slot"] > resumed_at], 10,
                 "tick sent again after resume()")

    _, moved_at = control(store, lambda s: s.reschedule("tick", every=2))
    clock_passed(rig, moved_at, 5)
    on_new = [r["slot"] for r in sent(rig, "tick") if r["slot"] > moved_at]
    assert len(on_new) >= 2 and all(s % 2000 == 0 for s in on_new), on_new

    per_slot = Counter(r["slot"] for r in sent(rig, "tick"))
    assert set(per_slot.values()) == {1}, f"a slot was sent twice: {per_slot}"
    resumed = min(r["t"] for r in sent(rig, "tick") if r["slot"] > resumed_at) * 1000
    print(f"declared actor: 0 messages for slots after pause() returned; first message "
          f"{resumed - resumed_at:.0f} ms after resume() returned; {len(on_new)} slots on "
          f"the every-2s grid after reschedule(), none off it; {len(per_slot)} slots, each "
          f"sent once")
    changes, _ = control(store, lambda s: s.changes("tick"))
    assert [c.action for c in changes] == ["reschedule", "resume", "pause"]
    assert changes[-1].by == "test"
