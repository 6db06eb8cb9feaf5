"""Wake-ups through the store's channel (``Backend.watch``): Redis/Valkey pub/sub and
PostgreSQL LISTEN/NOTIFY. With a long heartbeat, a graceful hand-over and a trigger()
must still act within a fraction of a second; with the channel lost, instances poll.

Stores without a channel (SQLite) are not collected: they keep polling every heartbeat.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest

from anarchon import AsyncScheduler, RunContext
from anarchon.backends import Backend
from anarchon.backends import wakeups as wakeups_module
from anarchon.backends.base import Wakeup
from anarchon.backends.capabilities import ControlStore
from tests.conftest import only_lease_stores
from tests.stores import StoreSpec
from tests.support import EventLog, counted_polls, registered, run, wait_until

#: long enough that polling could never explain a prompt reaction
SLOW: dict[str, Any] = dict(lease=15, heartbeat=5, jitter=0.05)
#: the bound for "at once" on a shared, loaded 2-core machine (typically ~10 ms)
PROMPT = 1.0


#: the lease stores with a wake-up channel (SQLite has none: it keeps polling)
WATCHING = ("postgres", "redis", "redis-cluster", "valkey")
#: those of them with runtime control (a "changed" wake-up)
CONTROL_WATCHING = ("postgres", "redis", "redis-cluster", "valkey")


@pytest.fixture
def make_watching(make_backend: Callable[[], Backend]) -> Callable[[], Backend]:
    """``make_backend``, on a store that has a wake-up channel."""
    assert type(make_backend()).watch is not Backend.watch, "this store has no channel"
    return make_backend


#: an ``at()`` moment no test reaches
NEVER = datetime(2100, 1, 1, tzinfo=timezone.utc)


def soon(seconds: float = 0.6) -> datetime:
    moment = datetime.now(timezone.utc) + timedelta(seconds=seconds)
    return moment.replace(microsecond=0) + timedelta(seconds=1)


def tapped(backend: Backend, seen: list[Wakeup]) -> Backend:
    """``backend``, whose wake-ups (``Backend.watch(notify)``, the scheduler's seam to the
    channel) are also appended to ``seen``, in order, before the scheduler acts on them."""
    watch = backend.watch

    async def watch_and_tell(notify: Callable[[Wakeup], None]) -> None:
        def tell(wakeup: Wakeup) -> None:
            seen.append(wakeup)
            notify(wakeup)

        await watch(tell)

    backend.watch = watch_and_tell  # type: ignore[method-assign]
    return backend


async def channel_up(*schedulers: AsyncScheduler) -> None:
    await wait_until(lambda: all(s.stats().wake_channel_up for s in schedulers), 5,
                     "the wake-up channels to be up")


def long_job(ctx: RunContext) -> None:
    ctx.signal.wait(30)
    ctx.signal.raise_if_aborted()


@only_lease_stores(*WATCHING)
def test_graceful_stop_hands_over_at_once_with_a_long_heartbeat(
        make_watching: Callable[[], Backend]) -> None:
    log = EventLog()

    async def scenario() -> None:
        schedulers = [log.attach(AsyncScheduler(make_watching(), instance_id=f"i{n}",
                                                max_attempts=1, **SLOW)) for n in range(3)]
        for s in schedulers:
            s.at("idle", NEVER, long_job)  # the channel comes up before "once" is planned
            await s.start()
        await channel_up(*schedulers)
        # the moment is chosen once all have started, so each plans it and claims it as
        # "scheduled" (a start() that ended after it would catch the slot up instead)
        when = soon()
        for s in schedulers:
            s.at("once", when, long_job)
        first = await log.wait(lambda e: e.type == "start", 5)
        # every backup has answered "taken" (so it watches the run) before the stop
        await log.wait(lambda e: len(log.of("skip")) >= 2, 5)
        runner = next(s for s in schedulers if s.instance_id == first.instance_id)
        stopped_at = time.monotonic()
        await runner.stop()
        took = await log.wait(lambda e: e.type == "start" and e.attempt == 2, 5)
        delay = log.when(lambda e: e is took)
        assert delay is not None
        assert delay - stopped_at < PROMPT, f"hand-over took {delay - stopped_at:.3f}s"
        assert took.reason == "takeover" and took.instance_id != runner.instance_id
        await asyncio.sleep(0.2)  # a second backup must not have started it too
        assert len([e for e in log.of("start") if e.attempt == 2]) == 1
        for s in schedulers:
            await s.stop()

    run(scenario())


@only_lease_stores(*WATCHING)
@pytest.mark.parametrize("declared", ["before start", "after start"])
def test_trigger_runs_at_once_with_a_long_heartbeat(
        make_watching: Callable[[], Backend], declared: str) -> None:
    log = EventLog()
    seen: list[Any] = []

    async def scenario() -> None:
        schedulers = [log.attach(AsyncScheduler(make_watching(), instance_id=f"i{n}",
                                                **SLOW)) for n in range(2)]
        for s in schedulers:
            if declared == "before start":
                s.every("rare", "1h", lambda ctx: seen.append(ctx.data))
            await s.start()
            if declared == "after start":  # its first job: the channel comes up now
                s.every("rare", "1h", lambda ctx: seen.append(ctx.data))
        await channel_up(*schedulers)
        requester = AsyncScheduler(make_watching())  # another scheduler, own connection
        await registered(requester, "rare", 5)
        asked_at = time.monotonic()
        await requester.trigger("rare", {"n": 1})
        done = await log.wait(lambda e: e.type == "success" and e.reason == "manual", 5)
        took = log.when(lambda e: e is done)
        assert took is not None and took - asked_at < PROMPT, took and took - asked_at
        await requester.stop()
        for s in schedulers:
            await s.stop()

    run(scenario())
    assert seen == [{"n": 1}]


@only_lease_stores(*WATCHING)
def test_idle_instances_do_not_poll_while_the_channel_is_up(
        make_watching: Callable[[], Backend]) -> None:
    calls: list[float] = []

    async def scenario() -> None:
        s = AsyncScheduler(counted_polls(make_watching(), calls), lease=2, heartbeat=0.1)
        s.every("rare", "1h", lambda ctx: None)
        await s.start()
        await channel_up(s)
        await asyncio.sleep(1.0)  # ten heartbeats
        await s.stop()

    run(scenario())
    # at most the poll on start and the one after "up" (30 s safety poll otherwise)
    assert len(calls) <= 2, calls


@only_lease_stores(*CONTROL_WATCHING)
def test_a_pause_is_applied_at_once_with_a_long_heartbeat(
        make_watching: Callable[[], Backend]) -> None:
    log = EventLog()

    async def scenario() -> None:
        s = log.attach(AsyncScheduler(make_watching(), instance_id="runner", **SLOW))
        assert isinstance(s.backend, ControlStore)
        s.every("rare", "1h", lambda ctx: None)
        await s.start()
        await channel_up(s)
        await wait_until(lambda: s.control.controls.generation is not None, 5,
                         "the first control snapshot")
        changer = AsyncScheduler(make_watching())  # another scheduler, own connection
        asked_at = time.monotonic()
        await changer.pause("rare", by="ops")
        change = await log.wait(lambda e: e.type == "change" and e.name == "rare", 5)
        took = log.when(lambda e: e is change)
        assert took is not None and took - asked_at < PROMPT, took and took - asked_at
        assert "rare" in s.control.controls.paused
        assert change.reason == "pause by ops"
        await changer.stop()
        await s.stop()

    run(scenario())


async def kill_wake_connections(backend: Backend, store: StoreSpec) -> int:
    """Cut the backend's wake-up connection (on the server of ``store``) from the server
    side; how many were cut."""
    if backend.name == "postgres":
        import psycopg

        from tests.stores.postgres import BASE_URL

        channel = backend.channel  # type: ignore[attr-defined]
        conn = await psycopg.AsyncConnection.connect(BASE_URL, autocommit=True)
        try:
            cur = await conn.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE query = %s", (f'LISTEN "{channel}"',))
            row = await cur.fetchone()
            return int(row[0]) if row else 0
        finally:
            await conn.close()
    from redis.asyncio import Redis

    from tests.stores import redis, valkey

    base = urlsplit(valkey.BASE_URL if store.id == "valkey" else redis.BASE_URL)
    scheme = "rediss" if base.scheme in ("rediss", "valkeys") else "redis"
    client = Redis.from_url(urlunsplit((scheme, base.netloc, base.path, "", "")))
    wake_name = backend.store.wake_client_name  # type: ignore[attr-defined]
    killed = 0
    try:
        for entry in await client.client_list():
            if entry.get("name") == wake_name:
                killed += int(await client.client_kill_filter(_id=entry["id"]))
    finally:
        await client.aclose()
    return killed


# on a Cluster the subscriber's node is not the one this test could kill it on
@only_lease_stores("postgres", "redis", "valkey")
def test_lost_channel_falls_back_to_polling_then_reconnects(
        make_watching: Callable[[], Backend], lease_store: StoreSpec,
        monkeypatch: pytest.MonkeyPatch) -> None:
    log = EventLog()
    wakeups: list[Wakeup] = []

    async def scenario() -> None:
        # reconnect only after 3 s, so the trigger below must be found by polling
        monkeypatch.setattr(wakeups_module, "RETRY_MIN", 3.0)
        backend = tapped(make_watching(), wakeups)
        s = log.attach(AsyncScheduler(backend, lease=2, heartbeat=0.3, jitter=0.05))
        s.every("rare", "1h", lambda ctx: None)
        await s.start()
        await channel_up(s)
        assert await kill_wake_connections(backend, lease_store) >= 1
        await wait_until(lambda: not s.stats().wake_channel_up, 5,
                         "the channel to be seen as down")
        requester = AsyncScheduler(make_watching())
        await requester.trigger("rare")
        await log.wait(lambda e: e.type == "success" and e.reason == "manual", 2)
        # found by the per-heartbeat poll, not by a message
        assert not s.stats().wake_channel_up
        await wait_until(lambda: s.stats().wake_channel_up, 10, "the channel to reconnect")
        await requester.trigger("rare")
        await wait_until(lambda: len(log.of("success")) >= 2, 5, "the second trigger")
        await requester.stop()
        await s.stop()

    run(scenario())
    kinds = [w.kind for w in wakeups]
    assert kinds[0] == "up" and "down" in kinds, kinds
    assert "up" in kinds[kinds.index("down"):], kinds
    assert "trigger" in kinds[kinds.index("down"):], kinds
