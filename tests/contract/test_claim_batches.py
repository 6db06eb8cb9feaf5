"""Batched claims and finishes (``claim_many``/``finish_many``) against real servers.

On Redis/Valkey a batch is one script call, on PostgreSQL one transaction in one round
trip, on SQLite one ``BEGIN IMMEDIATE`` transaction, on the ``"django"`` store one
transaction (one call to its ORM thread); on a Redis Cluster the default answers per
item. Either way every request must get the answer it
would have got alone: one winner per slot among schedulers, and late, overlap, taken,
takeover and exhausted answers side by side in one batch.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any, Literal

import pytest

from anarchon import AsyncScheduler, RunContext
from anarchon.backends.base import (
    Backend,
    ClaimReason,
    ClaimRequest,
    ClaimResult,
    Finish,
    JobSpec,
    LeaseBackend,
)
from anarchon.backends.capabilities import BatchStore
from anarchon.backends.redis import RedisBackend
from tests.conftest import only_lease_stores
from tests.support import run, wait_until

SHORT_LEASE_MS = 200
#: the stores where a batch is one script call (a Cluster answers per item)
ONE_SCRIPT_BATCHES = ("redis", "valkey")
#: the stores where a batch is one store call, judged in order
ONE_CALL_BATCHES = (*ONE_SCRIPT_BATCHES, "postgres", "sqlite", "django-sqlite",
                    "django-postgres", "django-mariadb")


def one_call(backend: Backend) -> bool:
    """Whether ``backend`` sends a batch as one call (judged in list order)."""
    if isinstance(backend, RedisBackend):
        return not backend.store.cluster
    return isinstance(backend, BatchStore)


def req(name: str, slot: int, owner: str, reason: ClaimReason = "scheduled", *,
        lease_ms: int = 60_000, max_late_ms: int = 60_000, max_attempts: int = 3,
        overlap: Literal["skip", "allow"] = "skip", catch_up_ms: int = 0,
        expected_attempt: int = 0) -> ClaimRequest:
    return ClaimRequest(name=name, slot=slot, owner=owner, reason=reason, lease_ms=lease_ms,
                        max_late_ms=max_late_ms, max_attempts=max_attempts, overlap=overlap,
                        catch_up_ms=catch_up_ms, expected_attempt=expected_attempt)


def fin(name: str, slot: int, owner: str, attempt: int) -> Finish:
    return Finish(name=name, slot=slot, owner=owner, attempt=attempt, status="success",
                  error=None, history_size=10, history_ttl_ms=None, retain_runs_ms=0)


def now_ms() -> int:
    return int(time.time() * 1000) // 1000 * 1000


def answers(results: list[Any]) -> list[tuple[str, int]]:
    out = []
    for result in results:
        assert not isinstance(result, Exception), result
        out.append((result.outcome, result.attempt))
    return out


async def opened(make: Callable[[], Backend], names: list[str]) -> Backend:
    backend = make()
    await backend.open()
    await backend.register([JobSpec(n, "every", "every 1s") for n in names])
    return backend


def test_n_jobs_in_one_slot_on_three_schedulers_get_one_winner_each(
        make_backend: Callable[[], Backend]) -> None:
    names = [f"job-{i}" for i in range(60)]

    async def body() -> None:
        backends = [await opened(make_backend, names) for _ in range(3)]
        slot = now_ms()
        try:
            batches = await asyncio.gather(*(
                b.claim_many([req(n, slot, f"i{k}") for n in names])
                for k, b in enumerate(backends)))
            winners: Counter[str] = Counter()
            for k, batch in enumerate(batches):
                for name, (outcome, attempt) in zip(names, answers(batch), strict=True):
                    assert outcome in ("won", "taken"), (name, outcome)
                    if outcome == "won":
                        assert attempt == 1
                        winners[name] += 1
                        assert await backends[k].confirm(req(name, slot, f"i{k}")) == 1
            assert winners == Counter({n: 1 for n in names})
        finally:
            for b in backends:
                await b.close()

    run(body())


def test_a_mixed_batch_gives_each_job_its_own_answer(
        make_backend: Callable[[], Backend]) -> None:
    names = ["free", "late", "taken", "overlap", "takeover", "exhausted", "twice", "catchup"]

    async def body() -> None:
        a = await opened(make_backend, names)
        other = await opened(make_backend, names)
        slot = now_ms()
        try:
            # prepare, one claim at a time, as another instance
            assert (await other.claim(req("taken", slot, "B"))).outcome == "won"
            assert (await other.claim(req("overlap", slot - 1000, "B"))).outcome == "won"
            for name, attempts in (("takeover", 3), ("exhausted", 1)):
                won = await other.claim(req(name, slot, "B", lease_ms=SHORT_LEASE_MS,
                                            max_attempts=attempts))
                assert won.outcome == "won"
            await asyncio.sleep(3 * SHORT_LEASE_MS / 1000)  # both leases expire

            batch = [
                req("free", slot, "A"),
                req("late", slot - 120_000, "A", max_late_ms=1_000),
                req("taken", slot, "A"),
                req("overlap", slot, "A"),
                # short leases here too: a store up for less than the claim's lease defers
                # takeovers (a lease may have lapsed while it was down), and CI's servers
                # are minutes old
                req("takeover", slot, "A", "takeover", expected_attempt=1,
                    lease_ms=SHORT_LEASE_MS),
                req("exhausted", slot, "A", "takeover", expected_attempt=1, max_attempts=1,
                    lease_ms=SHORT_LEASE_MS),
                req("twice", slot, "A"),
                req("twice", slot, "A"),  # the same run twice: the second sees the first
                req("catchup", slot - 3_600_000, "A", "catch-up", catch_up_ms=60_000),
            ]
            got = answers(await a.claim_many(batch))
            assert got[:6] + got[8:] == [("won", 1), ("late", 0), ("taken", 0),
                                         ("overlap", 0), ("won", 2), ("exhausted", 0),
                                         ("late", 0)]
            # one of the two identical requests wins; a one-call batch judges them in
            # order, the per-item default sends them concurrently
            assert sorted(got[6:8]) == [("taken", 0), ("won", 1)]
            if one_call(a):
                assert got[6:8] == [("won", 1), ("taken", 0)]

            recorded = await a.finish_many([
                fin("free", slot, "A", 1),
                fin("takeover", slot, "B", 1),  # the stale runner: fenced out
                fin("takeover", slot, "A", 2),
                fin("taken", slot, "A", 1),  # not ours
                fin("twice", slot, "A", 1),
            ])
            assert recorded == [True, False, True, False, True]
            [last] = await a.history("takeover", 1)
            assert (last.instance_id, last.attempt, last.status) == ("A", 2, "success")
            assert await a.finish_many([]) == []
            assert await a.claim_many([]) == []
        finally:
            await a.close()
            await other.close()

    run(body())


@only_lease_stores(*ONE_CALL_BATCHES)
def test_a_batch_of_finishes_records_each_as_one_by_one(
        make_backend: Callable[[], Backend]) -> None:
    """Twice the same run, different outcomes side by side, and history bounded per job
    by its own limits (size, age), all in one ``finish_many``."""
    async def body() -> None:
        backend = await opened(make_backend, ["a", "b", "c", "d"])
        try:
            first = now_ms() - 3_000
            slots = [first, first + 1_000, first + 2_000]
            batch = [req(name, slot, "A", overlap="allow") for name in ("a", "b", "c", "d")
                     for slot in slots]
            assert set(answers(await backend.claim_many(batch))) == {("won", 1)}

            def ended(name: str, slot: int, status: Any = "success", error: str | None = None,
                      size: int = 10, ttl_ms: int | None = None) -> Finish:
                return Finish(name=name, slot=slot, owner="A", attempt=1, status=status,
                              error=error, history_size=size, history_ttl_ms=ttl_ms,
                              retain_runs_ms=3_600_000)


            recorded = await backend.finish_many([
                ended("a", slots[0]),
                ended("a", slots[0], "failure", "late echo"),  # the same run: fenced out
                ended("b", slots[0], "failure", "KeyError: 'x'"),
                ended("b", slots[1], "failure", "ValueError: y"),
                ended("b", slots[2]),
                *(ended("c", slot, size=2) for slot in slots),
                *(ended("d", slot, ttl_ms=1) for slot in slots[:2]),
            ])
            assert recorded == [True, False, *[True] * 8]
            await asyncio.sleep(0.01)  # d's first attempts are older than its history_ttl
            assert await backend.finish_many([ended("d", slots[2], ttl_ms=1)]) == [True]
            a = await backend.history("a", 10)
            assert [(r.slot, r.status, r.error) for r in a if r.slot == slots[0]] == [
                (slots[0], "success", None)]
            b = {r.slot: (r.status, r.error) for r in await backend.history("b", 10)}
            assert b == {slots[0]: ("failure", "KeyError: 'x'"),
                         slots[1]: ("failure", "ValueError: y"), slots[2]: ("success", None)}
            # c's own history_size of 2 keeps its two newest attempts
            assert sorted(r.slot for r in await backend.history("c", 10)) == slots[1:]
            assert len(await backend.history("b", 10)) == 3  # b's limit is its own
            # older than d's history_ttl (the attempts a batch ends may stay until the next)
            assert {r.slot for r in await backend.history("d", 10)} <= {slots[2]}
        finally:
            await backend.close()

    run(body())


@only_lease_stores(*ONE_CALL_BATCHES)
def test_a_batch_is_validated_before_any_write(
        make_backend: Callable[[], Backend]) -> None:
    async def body() -> None:
        backend = await opened(make_backend, ["one", "two"])
        assert one_call(backend) and isinstance(backend, LeaseBackend)
        slot = now_ms()
        try:
            with pytest.raises(Exception, match="lease_ms must be positive"):
                await backend.claim_many([req("one", slot, "A"),
                                          req("two", slot, "A", lease_ms=0)])
            assert await backend.confirm(req("one", slot, "A")) == 0  # nothing written
            assert answers(await backend.claim_many([req("one", slot, "A")])) == [("won", 1)]
            bad = Finish(**{**fin("one", slot, "A", 1).__dict__, "status": "bogus"})
            with pytest.raises(Exception, match="status"):
                await backend.finish_many([fin("one", slot, "A", 1), bad])
            [state] = await backend.unfinished(["one"])  # the first was not recorded
            assert (state.slot, state.owner, state.attempt) == (slot, "A", 1)
            assert await backend.finish_many([fin("one", slot, "A", 1)]) == [True]
        finally:
            await backend.close()

    run(body())


def count_batches(backend: Backend, tally: Counter[str]) -> None:
    """Count ``backend``'s ``claim_many()`` calls (``calls``) and the claims they carry
    (``claims``) in ``tally``; every call still goes to the store."""
    claim_many = backend.claim_many

    async def counted(requests: Sequence[ClaimRequest]) -> list[ClaimResult | Exception]:
        tally["calls"] += 1
        tally["claims"] += len(requests)
        return await claim_many(requests)

    backend.claim_many = counted  # type: ignore[method-assign]


def test_schedulers_batch_claims_and_start_each_slot_once(
        make_backend: Callable[[], Backend]) -> None:
    jobs = 40
    starts: Counter[tuple[str, int]] = Counter()

    async def handler(ctx: RunContext) -> None:
        starts[(ctx.name, ctx.slot)] += 1

    async def body() -> None:
        schedulers = []
        batches: Counter[str] = Counter()
        for k in range(3):
            backend = make_backend()
            if k == 0:
                count_batches(backend, batches)
            scheduler = AsyncScheduler(backend, instance_id=f"i{k}", lease=5,
                                       heartbeat=1)
            for i in range(jobs):
                scheduler.every(f"job-{i}", "1s", handler, jitter=0.02, catch_up=0)
            schedulers.append(scheduler)
        for scheduler in schedulers:
            await scheduler.start()
        try:
            await wait_until(lambda: len({s for _, s in starts}) >= 3, 10, "three slots")
            await asyncio.sleep(0.3)  # the last slot's runs finish
        finally:
            for scheduler in schedulers:
                await scheduler.stop()
        assert starts and max(starts.values()) == 1, "a slot started twice"
        by_slot = Counter(slot for _, slot in starts)
        complete = [slot for slot, n in by_slot.items() if n == jobs]
        assert len(complete) >= 2, by_slot  # full slots: every job ran once
        if isinstance(schedulers[0].backend, BatchStore):
            assert batches["claims"] >= jobs
            assert batches["calls"] < batches["claims"] / 2, batches

    run(body())


@only_lease_stores(*ONE_SCRIPT_BATCHES)
def test_redis_batches_survive_a_script_flush(make_backend: Callable[[], Backend]) -> None:
    async def body() -> None:
        backend = await opened(make_backend, ["one", "two"])
        assert isinstance(backend, RedisBackend) and not backend.store.cluster
        slot = now_ms()
        try:
            await backend.store.command("SCRIPT", "FLUSH")
            got = answers(await backend.claim_many([req("one", slot, "A"),
                                                    req("two", slot, "A")]))
            assert got == [("won", 1), ("won", 1)]
            await backend.store.command("SCRIPT", "FLUSH")
            assert await backend.finish_many([fin("one", slot, "A", 1),
                                              fin("two", slot, "A", 1)]) == [True, True]
        finally:
            await backend.close()

    run(body())
