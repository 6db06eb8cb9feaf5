"""Slots given up (``late``, ``overlap``) are written to history once per slot, cluster
wide, on every lease store (``Backend.record_skips``, the rules in
``anarchon.backends.skips``), and a scheduler writes them by itself."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence

import pytest

from anarchon import AsyncScheduler, RunContext
from anarchon.backends.base import Backend, Finish
from anarchon.backends.capabilities import SkipStore
from anarchon.backends.skips import Skip
from tests.contract.test_claim_batches import now_ms, opened, req
from tests.support import EventLog, run

NAMES = ["late", "ran", "overlap", "bounded", "bad"]


def skip(name: str, slot: int, owner: str, reason: str = "late", *, size: int = 10,
         ttl_ms: int | None = None) -> Skip:
    return Skip(name, slot, owner, reason, size, ttl_ms)  # type: ignore[arg-type]


async def _cluster(make_backend: Callable[[], Backend], size: int = 3) -> list[SkipStore]:
    backends = [await opened(make_backend, NAMES) for _ in range(size)]
    stores = [backend for backend in backends if isinstance(backend, SkipStore)]
    assert len(stores) == size, f"{backends[0].name} keeps no skip records"
    return stores


async def _close(backends: Sequence[Backend]) -> None:
    for backend in backends:
        await backend.close()


def test_a_late_slot_is_recorded_once_however_many_instances_record_it(
        make_backend: Callable[[], Backend]) -> None:
    async def body() -> None:
        backends = await _cluster(make_backend)
        slot = now_ms() - 120_000
        try:
            for k, backend in enumerate(backends):
                answer = await backend.claim(req("late", slot, f"i{k}", max_late_ms=1_000))
                assert answer.outcome == "late"
            await asyncio.gather(*(b.record_skips([skip("late", slot, f"i{k}")])
                                   for k, b in enumerate(backends)))
            records = await backends[0].history("late", 10)
            assert len(records) == 1, records
            [record] = records
            assert (record.slot, record.attempt, record.status, record.reason,
                    record.manual) == (slot, 0, "skipped", "late", False)
            assert record.instance_id in {"i0", "i1", "i2"}
            assert record.finished_at == record.started_at and record.duration == 0
        finally:
            await _close(backends)

    run(body())


def test_a_late_skip_is_not_recorded_for_a_slot_another_instance_ran(
        make_backend: Callable[[], Backend]) -> None:
    async def body() -> None:
        a, b = await _cluster(make_backend, 2)
        slot = now_ms()
        try:
            assert (await b.claim(req("ran", slot, "B"))).outcome == "won"
            await a.record_skips([skip("ran", slot, "A")])
            records = await a.history("ran", 10)
            assert [(r.attempt, r.status) for r in records] == [(1, "running")]
        finally:
            await _close([a, b])

    run(body())


def test_an_overlap_skip_is_recorded_once(make_backend: Callable[[], Backend]) -> None:
    async def body() -> None:
        backends = await _cluster(make_backend)
        slot = now_ms()
        try:
            assert (await backends[0].claim(req("overlap", slot - 1000, "i0"))).outcome \
                == "won"
            outcomes = [(await b.claim(req("overlap", slot, f"i{k}"))).outcome
                        for k, b in enumerate(backends[1:], 1)]
            assert outcomes[0] == "overlap" and outcomes[1] in ("overlap", "taken")
            await asyncio.gather(*(b.record_skips([skip("overlap", slot, f"i{k}", "overlap")])
                                   for k, b in enumerate(backends[1:], 1)))
            records = await backends[0].history("overlap", 10)
            skipped = [r for r in records if r.status == "skipped"]
            assert [(r.slot, r.attempt, r.reason) for r in skipped] == [(slot, 0, "overlap")]
            assert [(r.slot, r.status) for r in records if r.status != "skipped"] == [
                (slot - 1000, "running")]
        finally:
            await _close(backends)

    run(body())


def test_skip_records_are_bounded_apart_from_the_attempts(
        make_backend: Callable[[], Backend]) -> None:
    """Up to ``history_size`` skip records beside up to ``history_size`` attempts: skips
    never push runs out of history."""
    async def body() -> None:
        [backend] = await _cluster(make_backend, 1)
        base = now_ms() - 600_000
        try:
            ran = now_ms()
            assert (await backend.claim(req("bounded", ran, "A"))).outcome == "won"
            assert await backend.finish(Finish("bounded", ran, "A", 1, "success", None, 3,
                                               None, 0))
            for n in range(6):  # one call per skip: each bounds the skip records
                await backend.record_skips([skip("bounded", base + n * 1000, "A", size=3)])
            records = await backend.history("bounded", 10)
            skipped = [r for r in records if r.status == "skipped"]
            # the bound runs before a call's own record is counted on PostgreSQL (one
            # statement's snapshot): at most one more than history_size
            assert 3 <= len(skipped) <= 4, records
            assert max(r.slot for r in skipped) == base + 5000
            assert [(r.slot, r.status) for r in records if r.status != "skipped"] == [
                (ran, "success")]
            await backend.finish(Finish("bounded", ran, "A", 1, "success", None, 1, None, 0))
            assert len([r for r in await backend.history("bounded", 10)
                        if r.status == "skipped"]) == len(skipped)
        finally:
            await _close([backend])

    run(body())


@pytest.mark.parametrize(("bad", "message"), [
    (skip("bad", 1, "A", "overlapping"), "skip reason must be one of"),
    (skip("bad", 1, ""), "skip owner must be a non-empty str"),
    (skip("bad", 1, "A", size=-1), "history_size must be at least 0"),
    (Skip("bad", "1", "A", "late", 10, None), "slot must be an int"),  # type: ignore[arg-type]
])
def test_a_malformed_skip_refuses_the_whole_batch(
        make_backend: Callable[[], Backend], bad: Skip, message: str) -> None:
    async def body() -> None:
        [backend] = await _cluster(make_backend, 1)
        slot = now_ms() - 60_000
        try:
            with pytest.raises((ValueError, TypeError), match=message):
                await backend.record_skips([skip("bad", slot, "A"), bad])
            assert await backend.history("bad", 10) == []
        finally:
            await _close([backend])

    run(body())


def test_a_scheduler_records_its_overlap_skips_in_history(
        make_backend: Callable[[], Backend]) -> None:
    log = EventLog()

    def slow(ctx: RunContext) -> None:
        ctx.signal.wait(1.3)

    async def scenario() -> list[int]:
        schedulers = [log.attach(AsyncScheduler(make_backend(), instance_id=f"i{n}",
                                                lease=1.5, heartbeat=0.2, jitter=0.05))
                      for n in range(2)]
        for s in schedulers:
            s.every("slow", "0.5s", slow)
            await s.start()
        try:
            await log.wait(lambda e: e.type == "skip" and e.reason == "overlap", 6)
            skipped = sorted({e.slot for e in log.of("skip") if e.reason == "overlap"
                              and e.slot is not None})

            deadline = time.monotonic() + 5
            while True:  # written off the claim path, just after the skip
                records = await schedulers[0].history("slow", 50)
                if {r.slot for r in records if r.status == "skipped"} >= set(skipped):
                    break
                assert time.monotonic() < deadline, (skipped, records)
                await asyncio.sleep(0.05)
            last = await schedulers[0].last_run("slow")
            assert last is not None and last.status != "skipped"
        finally:
            for s in schedulers:
                await s.stop()
        skips = [r for r in records if r.status == "skipped"]
        assert all(r.reason == "overlap" and r.attempt == 0 for r in skips), skips
        assert len({r.slot for r in skips}) == len(skips)  # once per slot
        started = {e.slot for e in log.of("start")}
        assert not {r.slot for r in skips} & started
        return skipped

    assert run(scenario())
