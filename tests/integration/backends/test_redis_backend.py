"""The Redis/Valkey backends against real servers (Redis 7 and Valkey 8).

Direct tests of the backend contract (``anarchon/backends/base.py``): claims, leases,
takeover, fencing, history and namespaces. Servers come from ``tests/stores``; a missing
server skips locally and fails in CI.
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, Literal

import pytest

from anarchon.backends import from_url
from anarchon.backends.base import (
    Backend,
    ClaimBackend,
    ClaimReason,
    ClaimRequest,
    Finish,
    HeldRun,
    JobSpec,
    LeaseBackend,
    RunKey,
)
from anarchon.backends.redis import RedisBackend, ValkeyBackend
from anarchon.errors import IncompatibleStoreError, StoreError
from tests.stores import StoreSpec, in_ci
from tests.stores.redis import STORE as REDIS
from tests.stores.valkey import STORE as VALKEY

LEASE_MS = 300


@pytest.fixture(params=[REDIS, VALKEY], ids=lambda s: s.id)
def spec(request: pytest.FixtureRequest) -> StoreSpec:
    store: StoreSpec = request.param
    reason = store.unavailable()
    if reason is not None:
        message = f"{store.id} server not available: {reason}"
        if in_ci():
            pytest.fail(f"CI needs every server: {message}", pytrace=False)
        pytest.skip(message)
    return store


@pytest.fixture
def url(spec: StoreSpec) -> str:
    return spec.url_for("t_" + uuid.uuid4().hex[:10])


def lease_backend(url: str, **options: Any) -> RedisBackend:
    backend = from_url(url, **options)
    assert isinstance(backend, RedisBackend)
    return backend


def run(body: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(body())  # type: ignore[arg-type]


async def server_ms(backend: Backend) -> int:
    store = backend.store  # type: ignore[attr-defined]
    reply = await store.command("TIME")
    return int(reply[0]) * 1000 + int(reply[1]) // 1000


async def is_cluster(client: Any) -> bool:
    info = await client.info("cluster")
    return bool(info.get("cluster_enabled"))


def req(name: str, slot: int, owner: str, reason: ClaimReason = "scheduled", *,
        lease_ms: int = LEASE_MS, max_late_ms: int = 60_000, max_attempts: int = 3,
        overlap: Literal["skip", "allow"] = "skip", catch_up_ms: int = 0,
        expected_attempt: int = 0) -> ClaimRequest:
    return ClaimRequest(name=name, slot=slot, owner=owner, reason=reason, lease_ms=lease_ms,
                        max_late_ms=max_late_ms, max_attempts=max_attempts, overlap=overlap,
                        catch_up_ms=catch_up_ms, expected_attempt=expected_attempt)


def fin(name: str, slot: int, owner: str, attempt: int, status: Any = "success", *,
        error: str | None = None, history_size: int = 100, history_ttl_ms: int | None = None,
        retain_runs_ms: int = 86_400_000) -> Finish:
    return Finish(name=name, slot=slot, owner=owner, attempt=attempt, status=status,
                  error=error, history_size=history_size, history_ttl_ms=history_ttl_ms,
                  retain_runs_ms=retain_runs_ms)


async def until_expired(backend: RedisBackend, name: str, slot: int,
                        timeout: float = 3.0) -> None:
    """Poll (by the store's clock) until the run's lease has expired."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        states = (await backend.heartbeat("nobody", [], [RunKey(name, slot)], LEASE_MS)).watched
        if states[0].lease_expired:
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"lease of {name}@{slot} did not expire within {timeout}s")


def test_claim_won_then_taken(url: str) -> None:
    async def body() -> None:
        a, b = lease_backend(url), lease_backend(url)
        await a.open()
        now = await server_ms(a)
        won = await a.claim(req("job", now, "A"))
        assert (won.outcome, won.attempt) == ("won", 1)
        assert abs(won.store_ms - now) < 5_000
        taken = await b.claim(req("job", now, "B"))
        assert (taken.outcome, taken.attempt) == ("taken", 0)
        assert await a.confirm(req("job", now, "A")) == 1
        assert await b.confirm(req("job", now, "B")) == 0
        [record] = await b.history("job", 10)
        assert (record.instance_id, record.attempt, record.status, record.reason) == (
            "A", 1, "running", "scheduled")
        assert record.started_at.tzinfo is not None and record.finished_at is None
        assert [s.slot for s in await b.unfinished(["job"])] == [now]
        await a.close()
        await b.close()
    run(body)


def test_late_by_server_time(url: str) -> None:
    async def body() -> None:
        b = lease_backend(url)
        now = await server_ms(b)
        assert (await b.claim(req("job", now - 120_000, "A"))).outcome == "late"
        assert (await b.claim(req("job", 1_000, "A"))).outcome == "late"
        # within max_late by the server's clock
        assert (await b.claim(req("job", now - 1_000, "A"))).outcome == "won"
        assert await b.history("job", 10) != []
        await b.close()
    run(body)


def test_overlap_skip_is_final_and_allow_runs(url: str) -> None:
    async def body() -> None:
        b = lease_backend(url)
        now = await server_ms(b)
        assert (await b.claim(req("job", now, "A", lease_ms=10_000))).outcome == "won"
        assert (await b.claim(req("job", now + 1, "B"))).outcome == "overlap"
        # a skipped slot never runs later, whatever is asked
        assert (await b.claim(req("job", now + 1, "C", overlap="allow"))).outcome == "overlap"
        assert (await b.claim(req("job", now + 2, "D", overlap="allow"))).outcome == "won"
        assert sorted(s.slot for s in await b.unfinished(["job"])) == [now, now + 2]
        await b.close()
    run(body)


def test_takeover_only_after_expiry_with_one_winner(url: str) -> None:
    async def body() -> None:
        backends = [lease_backend(url) for _ in range(6)]
        a, others = backends[0], backends[1:]
        await asyncio.gather(*(b.open() for b in backends))  # connect before timing
        now = await server_ms(a)
        assert (await a.claim(req("job", now, "A", lease_ms=1_000))).outcome == "won"
        early = await others[0].claim(req("job", now, "B0", "takeover", expected_attempt=1))
        assert early.outcome == "taken"
        await until_expired(a, "job", now)
        results = await asyncio.gather(*(
            b.claim(req("job", now, f"B{i}", "takeover", expected_attempt=1))
            for i, b in enumerate(others)))
        winners = [(i, r) for i, r in enumerate(results) if r.outcome == "won"]
        assert len(winners) == 1, results
        index, winner = winners[0]
        assert winner.attempt == 2
        assert {r.outcome for r in results} == {"won", "taken"}
        history = await a.history("job", 10)
        assert [(r.attempt, r.status, r.reason, r.instance_id) for r in history] == [
            (2, "running", "takeover", f"B{index}"), (1, "interrupted", "scheduled", "A")]
        assert history[1].finished_at is not None and history[1].duration is not None
        # the old runner's heartbeat learns it lost the run
        lost = await a.heartbeat("A", [HeldRun("job", now, 1)], [], LEASE_MS)
        assert lost.lost == frozenset({RunKey("job", now)})
        for b in backends:
            await b.close()
    run(body)


def test_exhausted_after_max_attempts(url: str) -> None:
    async def body() -> None:
        b = lease_backend(url)
        now = await server_ms(b)
        assert (await b.claim(req("job", now, "A", max_attempts=2))).attempt == 1
        await until_expired(b, "job", now)
        second = await b.claim(req("job", now, "B", "takeover", max_attempts=2,
                                   expected_attempt=1))
        assert (second.outcome, second.attempt) == ("won", 2)
        await until_expired(b, "job", now)
        third = await b.claim(req("job", now, "C", "takeover", max_attempts=2,
                                  expected_attempt=2))
        assert (third.outcome, third.attempt) == ("exhausted", 0)
        assert await b.unfinished(["job"]) == []
        assert [r.status for r in await b.history("job", 10)] == ["interrupted"] * 2
        again = await b.claim(req("job", now, "D", "takeover", max_attempts=2,
                                  expected_attempt=2))
        assert again.outcome == "taken"
        await b.close()
    run(body)


def test_handover_is_not_counted(url: str) -> None:
    async def body() -> None:
        b = lease_backend(url)
        now = await server_ms(b)
        assert (await b.claim(req("job", now, "A", max_attempts=1, lease_ms=10_000))).attempt == 1
        assert not await b.release("X", HeldRun("job", now, 1))  # fenced by owner
        assert await b.release("A", HeldRun("job", now, 1))
        [state] = (await b.heartbeat("B", [], [RunKey("job", now)], LEASE_MS)).watched
        assert (state.running, state.lease_expired, state.handed_over) == (True, True, True)
        taken = await b.claim(req("job", now, "B", "takeover", max_attempts=1,
                                  expected_attempt=1))
        assert (taken.outcome, taken.attempt) == ("won", 2)
        # attempt 2 was not counted, but max_attempts=1 is now used up
        await until_expired(b, "job", now)
        third = await b.claim(req("job", now, "C", "takeover", max_attempts=1,
                                  expected_attempt=2))
        assert third.outcome == "exhausted"
        await b.close()
    run(body)


def test_heartbeat_renews_in_one_call_and_reports_lost(url: str) -> None:
    async def body() -> None:
        b = lease_backend(url)
        now = await server_ms(b)
        for name in ("j1", "j2"):
            assert (await b.claim(req(name, now, "A"))).outcome == "won"
        calls = 0
        real = b.store._call

        async def counting(fn: Any, *args: Any, **kwargs: Any) -> Any:
            nonlocal calls
            calls += 1
            return await real(fn, *args, **kwargs)

        b.store._call = counting  # type: ignore[method-assign]
        held = [HeldRun("j1", now, 1), HeldRun("j2", now, 1), HeldRun("j2", now, 7)]
        result = await b.heartbeat("A", held, [RunKey("j1", now), RunKey("j3", 5)], 5_000)
        assert calls == (3 if b.store.cluster else 1)  # a Cluster: one call per job
        b.store._call = real  # type: ignore[method-assign]
        assert result.lost == frozenset({RunKey("j2", now)})  # attempt 7 is not ours
        j1, j3 = result.watched
        assert (j1.owner, j1.attempt, j1.running, j1.lease_expired) == ("A", 1, True, False)
        assert not j3.running
        # renewed to 5 s: still valid after the original 300 ms lease
        await asyncio.sleep(LEASE_MS / 1000 + 0.05)
        [state] = (await b.heartbeat("x", [], [RunKey("j2", now)], LEASE_MS)).watched
        assert not state.lease_expired
        stale = await b.heartbeat("B", [HeldRun("j1", now, 1)], [], LEASE_MS)
        assert stale.lost == frozenset({RunKey("j1", now)})
        await b.close()
    run(body)


def test_finish_is_fenced(url: str) -> None:
    async def body() -> None:
        b = lease_backend(url)
        now = await server_ms(b)
        await b.claim(req("job", now, "A"))
        await until_expired(b, "job", now)
        assert (await b.claim(req("job", now, "B", "takeover", expected_attempt=1))).attempt == 2
        before = await b.history("job", 10)
        assert not await b.finish(fin("job", now, "A", 1, "success"))
        assert not await b.finish(fin("job", now, "A", 2, "success"))  # wrong owner
        assert await b.history("job", 10) == before
        assert await b.finish(fin("job", now, "B", 2, "failure", error="boom"))
        assert not await b.finish(fin("job", now, "B", 2, "success"))  # only once
        latest = (await b.history("job", 10))[0]
        assert (latest.status, latest.error, latest.attempt) == ("failure", "boom", 2)
        assert latest.duration is not None and latest.duration >= 0
        assert await b.unfinished(["job"]) == []
        await b.close()
    run(body)


def test_expired_earlier_run_is_interrupted_by_next_slot(url: str) -> None:
    async def body() -> None:
        b = lease_backend(url)
        now = await server_ms(b)
        await b.claim(req("job", now - 10, "A"))
        await until_expired(b, "job", now - 10)
        assert (await b.claim(req("job", now, "B"))).outcome == "won"
        assert [s.slot for s in await b.unfinished(["job"])] == [now]
        old = [r for r in await b.history("job", 10) if r.slot == now - 10]
        assert old[0].status == "interrupted"
        assert (await b.claim(req("job", now - 10, "C", "takeover",
                                  expected_attempt=1))).outcome == "taken"
        assert not await b.finish(fin("job", now - 10, "A", 1))
        await b.close()
    run(body)


def test_catch_up_needs_job_known_before_slot(url: str) -> None:
    async def body() -> None:
        b = lease_backend(url)
        before = await server_ms(b) - 1_000
        await b.register([JobSpec("job", "every", "every 1s")])
        first = await b.claim(req("job", before, "A", "catch-up", catch_up_ms=60_000))
        assert first.outcome == "late"  # the job was not known yet at that slot
        now = await server_ms(b) + 1
        other = lease_backend(url)  # a fresh instance reads first_seen from the store
        won = await other.claim(req("job", now, "A", "catch-up", catch_up_ms=60_000))
        assert (won.outcome, won.attempt) == ("won", 1)
        assert (await b.history("job", 1))[0].reason == "catch-up"
        late = await b.claim(req("job2", now, "A", "catch-up", catch_up_ms=60_000))
        assert late.outcome == "late"  # never registered
        assert [j.name for j in await other.known_jobs()] == ["job"]
        await b.close()
        await other.close()
    run(body)


def test_history_size_ttl_and_running_kept(url: str) -> None:
    async def body() -> None:
        b = lease_backend(url)
        now = await server_ms(b)
        for i in range(5):
            await b.claim(req("job", now + i, "A", overlap="allow"))
            assert await b.finish(fin("job", now + i, "A", 1, history_size=3))
        history = await b.history("job", 10)
        assert [r.slot for r in history] == [now + 4, now + 3, now + 2]
        assert len(await b.history("job", 2)) == 2
        # a running attempt survives trimming
        await b.claim(req("job", now + 5, "A", overlap="allow", lease_ms=10_000))
        await b.claim(req("job", now + 6, "A", overlap="allow"))
        await b.finish(fin("job", now + 6, "A", 1, history_size=1))
        assert sorted(r.slot for r in await b.history("job", 10)) == [now + 5, now + 6]
        # ttl by start time
        await asyncio.sleep(0.15)
        await b.claim(req("job", now + 7, "A", overlap="allow"))
        await b.finish(fin("job", now + 7, "A", 1, history_ttl_ms=100))
        assert sorted(r.slot for r in await b.history("job", 10)) == [now + 5, now + 7]
        await b.close()
    run(body)


def test_manual_runs(url: str) -> None:
    async def body() -> None:
        b = lease_backend(url)
        token = await b.start_manual("job", "A", 1_700_000_000_000)
        [running] = await b.history("job", 5)
        assert (running.manual, running.reason, running.status) == (True, "manual", "running")
        await b.finish_manual(token, "success", None, 10, None)
        [done] = await b.history("job", 5)
        assert (done.status, done.slot, done.attempt) == ("success", 1_700_000_000_000, 1)
        assert await b.unfinished(["job"]) == []
        await b.close()
    run(body)


def test_prefixes_are_isolated(spec: StoreSpec) -> None:
    async def body() -> None:
        one = lease_backend(spec.url_for("iso1_" + uuid.uuid4().hex[:8]))
        two = lease_backend(spec.url_for("iso2_" + uuid.uuid4().hex[:8]))
        await one.register([JobSpec("job", "every", "every 1s")])
        now = await server_ms(one)
        assert (await one.claim(req("job", now, "A"))).outcome == "won"
        assert (await two.claim(req("job", now, "B"))).outcome == "won"
        assert [r.instance_id for r in await two.history("job", 5)] == ["B"]
        assert [j.name for j in await one.known_jobs()] == ["job"]
        assert await two.known_jobs() == []
        await one.close()
        await two.close()
    run(body)


def test_noscript_after_flush_is_reloaded(url: str) -> None:
    async def body() -> None:
        b = lease_backend(url)
        await b.open()
        if b.store.cluster:
            pytest.skip("SCRIPT FLUSH is per node")
        now = await server_ms(b)
        await b.claim(req("job", now, "A"))
        await b.store.command("SCRIPT", "FLUSH")
        assert (await b.claim(req("job", now + 1, "B", overlap="allow"))).outcome == "won"
        await b.store.command("SCRIPT", "FLUSH")
        assert await b.finish(fin("job", now + 1, "B", 1))
        await b.close()
    run(body)


def test_user_clients_are_never_closed(spec: StoreSpec, url: str) -> None:
    import redis
    import redis.asyncio

    base, _, _ = url.partition("?")
    base = base.replace("valkey://", "redis://")
    cls = ValkeyBackend if spec.id == "valkey" else RedisBackend
    prefix = "uc_" + uuid.uuid4().hex[:8] + ":"

    async def body() -> None:
        client = redis.asyncio.Redis.from_url(base)
        if await is_cluster(client):
            await client.aclose()
            pytest.skip("plain clients on a Cluster node")
        sync_client = redis.Redis.from_url(base)
        for user_client in (client, sync_client):
            b = cls(user_client, prefix=prefix)
            assert b.name == f"{spec.id}:lease"
            await b.open()
            now = await server_ms(b)
            assert (await b.claim(req(f"job{id(user_client)}", now, "A"))).outcome == "won"
            await b.close()
        assert await client.ping()
        assert sync_client.ping()
        await client.aclose()
        sync_client.close()
    run(body)


def test_valkey_py_client(spec: StoreSpec, url: str) -> None:
    valkey = pytest.importorskip("valkey.asyncio")
    base = url.partition("?")[0].replace("valkey://", "redis://")

    async def body() -> None:
        client = valkey.Valkey.from_url(base)
        if await is_cluster(client):
            await client.aclose()
            pytest.skip("plain clients on a Cluster node")
        b = ValkeyBackend(client, prefix="vk_" + uuid.uuid4().hex[:8] + ":")
        now = await server_ms(b)
        assert (await b.claim(req("job", now, "A"))).outcome == "won"
        await b.close()
        assert await client.ping()
        await client.aclose()
    run(body)


def test_from_url_builds_a_comparison_strategy_only_with_lab_opt_in() -> None:
    """The comparison strategies are lab code: a URL selects one only with ``lab=1``."""
    for url in ("redis://127.0.0.1:1/0?strategy=stream-id",
                "valkey://127.0.0.1:1/0?strategy=script&lab=0",
                "redis://127.0.0.1:1/0?strategy=idmp&lab=no"):
        with pytest.raises(ValueError, match=r"lab code .* add lab=1 to the URL"):
            from_url(url)
    with pytest.raises(ValueError, match="lab code"):
        from_url("redis://127.0.0.1:1/0", strategy="script", lab=False)
    assert from_url("redis://127.0.0.1:1/0?strategy=stream-id&lab=1").name == "redis:stream-id"
    assert from_url("redis://127.0.0.1:1/0?strategy=idmp&lab=true").name == "redis:idmp"
    assert from_url("redis://127.0.0.1:1/0", strategy="script", lab=True).name == "redis:script"
    # the lease store needs no opt-in and ignores one
    assert isinstance(from_url("redis://127.0.0.1:1/0?lab=1"), RedisBackend)
    assert isinstance(from_url("redis://127.0.0.1:1/0?strategy=lease"), RedisBackend)


def test_construction_and_bad_input() -> None:
    backend = RedisBackend("redis://127.0.0.1:1/0", prefix="svc:")
    assert backend.name == "redis:lease" and isinstance(backend, LeaseBackend)
    assert ValkeyBackend().name == "valkey:lease"
    for bad in ("a b", "x{", "y}", "z*", "q?", "[r]"):
        with pytest.raises(ValueError, match="prefix"):
            RedisBackend(prefix=bad)
    with pytest.raises(TypeError, match="window"):
        RedisBackend(window=5)
    with pytest.raises(TypeError, match="window"):
        RedisBackend(strategy="stream-id", window=5)
    with pytest.raises(ValueError, match="strategy"):
        RedisBackend(strategy="nope")
    built = from_url("redis://127.0.0.1:1/0?prefix=p1:&strategy=script&window=10m&lab=1")
    assert built.name == "redis:script" and isinstance(built, ClaimBackend)
    assert not isinstance(built, LeaseBackend)
    with pytest.raises(ValueError, match="window"):
        built.check_job("job", 2, 600)
    assert from_url("valkey://127.0.0.1:1?strategy=stream-id&lab=1").name == "valkey:stream-id"
    with pytest.raises(TypeError, match="Valkey"):
        ValkeyBackend(strategy="idmp")

    async def refused() -> None:
        with pytest.raises(StoreError, match=r"127\.0\.0\.1:1"):
            await backend.open()
    asyncio.run(refused())


# ----------------------------------------------------------------- claim-only strategies


def test_stream_id_strategy(url: str) -> None:
    async def body() -> None:
        a = from_url(url, strategy="stream-id", lab=True)
        b = from_url(url, strategy="stream-id", lab=True)
        assert isinstance(a, ClaimBackend) and a.name.endswith(":stream-id")
        await a.open()
        now = await server_ms(a)
        assert (await a.claim(req("job", now, "A"))).outcome == "won"
        assert (await b.claim(req("job", now, "B"))).outcome == "taken"
        assert await a.confirm(req("job", now, "A")) == 1
        assert await b.confirm(req("job", now, "B")) == 0
        # the stream's last id never goes back: an older slot loses
        assert (await b.claim(req("job", now - 5, "B"))).outcome == "taken"
        assert (await b.claim(req("job2", now - 120_000, "B"))).outcome == "late"
        assert await a.finish(fin("job", now, "A", 1))
        assert not await b.finish(fin("job", now, "B", 1))
        [record] = await b.history("job", 5)
        assert (record.status, record.instance_id) == ("success", "A")
        await a.close()
        await b.close()
    run(body)


def test_script_strategy(url: str) -> None:
    async def body() -> None:
        a = from_url(url, strategy="script", window=60, lab=True)
        b = from_url(url, strategy="script", window=60, lab=True)
        now = await server_ms(a)
        results = await asyncio.gather(*(x.claim(req("job", now, o))
                                         for x, o in ((a, "A"), (b, "B"))))
        assert sorted(r.outcome for r in results) == ["taken", "won"]
        # an older slot can still win (unlike stream-id)
        assert (await b.claim(req("job", now - 5, "B"))).outcome == "won"
        assert (await b.claim(req("job", now - 120_000, "B"))).outcome == "late"
        assert await b.confirm(req("job", now - 5, "B")) == 1
        assert len(await a.history("job", 5)) == 2
        await a.close()
        await b.close()
    run(body)


def test_idmp_strategy_detects_support(spec: StoreSpec, url: str) -> None:
    if spec.id == "valkey":
        with pytest.raises(TypeError, match="Valkey"):
            from_url(url, strategy="idmp", lab=True)
        return

    async def body() -> None:
        backend = from_url(url, strategy="idmp", lab=True)
        assert backend.name == "redis:idmp"
        store = backend.store  # type: ignore[attr-defined]
        await store.connect()
        if store.version >= (8, 6):
            pytest.skip("server supports IDMP; covered by the conformance suite")
        with pytest.raises(IncompatibleStoreError, match=r"Redis 8\.6"):
            await backend.open()
        await backend.close()
    run(body)


# ----------------------------------------------------------------- Redis Cluster


def test_one_jobs_keys_share_a_cluster_slot() -> None:
    from redis.crc import key_slot

    backend = RedisBackend(prefix="svc:")
    for name in ("job", "a}b{c", "with:colon", "100%", "{tag}"):
        keys = backend.store.keys(name)
        every = [keys.runs, keys.active, keys.done, keys.att, keys.hist, keys.stream,
                 keys.seen]
        assert len({key_slot(k.encode()) for k in every}) == 1, name
    assert backend.store.keys("a}b").tag != backend.store.keys("a").tag


def test_redis_cluster_lease() -> None:
    cluster_url = os.environ.get("ANARCHON_REDIS_CLUSTER_URL")
    if not cluster_url:
        message = "ANARCHON_REDIS_CLUSTER_URL not set (scripts/servers.py start --cluster)"
        if in_ci():
            pytest.fail(message)
        pytest.skip(message)

    async def body() -> None:
        prefix = "cl_" + uuid.uuid4().hex[:8] + ":"
        a = RedisBackend(cluster_url, prefix=prefix)
        b = RedisBackend(cluster_url, prefix=prefix)
        await a.open()
        assert a.store.cluster
        names = [f"job{i}" for i in range(6)]  # spread over the three masters
        await a.register([JobSpec(n, "every", "every 1s") for n in names])
        now = await server_ms(a)
        for n in names:
            assert (await a.claim(req(n, now, "A"))).outcome == "won"
            assert (await b.claim(req(n, now, "B"))).outcome == "taken"
        beat = await a.heartbeat("A", [HeldRun(n, now, 1) for n in names],
                                 [RunKey(n, now) for n in names], 5_000)
        assert beat.lost == frozenset() and all(s.running for s in beat.watched)
        assert sorted(s.name for s in await b.unfinished(names)) == names
        assert await a.release("A", HeldRun("job0", now, 1))
        taken = await b.claim(req("job0", now, "B", "takeover", expected_attempt=1))
        assert (taken.outcome, taken.attempt) == ("won", 2)
        assert await b.finish(fin("job0", now, "B", 2))
        assert [r.status for r in await b.history("job0", 5)] == ["success", "interrupted"]
        assert [j.name for j in await b.known_jobs()] == names
        await a.close()
        await b.close()
    run(body)
