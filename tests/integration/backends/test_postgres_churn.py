"""Dropped connections are not an outage (issue 34, item 3), on PostgresBackend directly.

Every backend of the test's own ``application_name`` is terminated
(``pg_terminate_backend``; no other session of the shared server is touched): the next
claim and read succeed on new connections, without ``StoreError``, within the docs'
bound. With every pool connection busy in a long statement, a claim gets a direct
connection after ``ACQUIRE_TIMEOUT`` (0.3 s) instead of waiting for the pool.
"""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest

from anarchon.backends.base import ClaimRequest, JobSpec
from tests.conftest import _require
from tests.stores.postgres import STORE

pytest.importorskip("psycopg")
import psycopg
from psycopg import sql

from anarchon.backends.postgres import PostgresBackend
from anarchon.backends.postgres.claims import dropped
from anarchon.backends.postgres.links import ACQUIRE_TIMEOUT
from tests.support import run


def _backend(app: str, pool_size: int = 2) -> PostgresBackend:
    _require(STORE)
    url = STORE.url_for("pc_" + uuid.uuid4().hex[:10])
    return PostgresBackend.from_url(f"{url}&application_name={app}", pool_size=pool_size)


def _terminate(app: str) -> int:
    admin_url = STORE.url_for("pc_admin").split("?")[0]
    with psycopg.connect(admin_url, autocommit=True) as admin:
        rows = admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                             "WHERE application_name = %s", (app,)).fetchall()
    return len(rows)


def _request(slot: int, name: str = "job") -> ClaimRequest:
    return ClaimRequest(name=name, slot=slot, owner="i1", reason="scheduled", lease_ms=2000,
                        max_late_ms=60_000, max_attempts=3, overlap="skip")


def test_terminated_connections_are_replaced_without_an_error() -> None:
    app = "anarchon-pc-" + uuid.uuid4().hex[:8]
    backend = _backend(app)

    async def scenario() -> None:
        await backend.open()
        await backend.register([JobSpec(f"job{n}", "every", "every 1s") for n in range(3)])
        for round_ in range(3):
            killed = await asyncio.to_thread(_terminate, app)
            assert killed >= 1, "the fault did not happen"
            began = time.monotonic()
            slot = int(time.time() * 1000)
            result = await backend.claim(_request(slot, f"job{round_}"))  # 57P01 only
            assert result.outcome == "won", result
            assert [r.slot for r in await backend.history(f"job{round_}", 10)] == [slot]
            took = time.monotonic() - began
            assert took < ACQUIRE_TIMEOUT + 1.0, took
        await backend.close()

    run(scenario())


def test_a_busy_pool_gives_a_direct_connection_after_the_acquire_timeout() -> None:
    app = "anarchon-pc-" + uuid.uuid4().hex[:8]
    backend = _backend(app, pool_size=1)  # 2 pool connections (one for heartbeats)

    async def scenario() -> None:
        await backend.open()
        await backend.register([JobSpec("job", "every", "every 1s")])
        sleeper = sql.SQL("SELECT pg_sleep(3)")
        blockers = [asyncio.ensure_future(backend._fetch("sleep", sleeper)) for _ in range(2)]
        await asyncio.sleep(0.3)  # both pool connections are in use
        began = time.monotonic()
        result = await backend.claim(_request(int(time.time() * 1000)))
        took = time.monotonic() - began
        assert result.outcome == "won"
        assert took < ACQUIRE_TIMEOUT + 0.5, f"claim waited {took:.2f}s for a connection"
        await asyncio.gather(*blockers)
        await backend.close()

    run(scenario())


def test_what_counts_as_a_dropped_connection() -> None:
    import psycopg_pool
    from psycopg import errors

    assert dropped(errors.AdminShutdown("terminating connection"), idempotent=False)
    assert dropped(psycopg.OperationalError("the connection is closed"), idempotent=False)
    lost = psycopg.OperationalError("server closed the connection unexpectedly")
    assert not dropped(lost, idempotent=False)  # a claim may have been applied
    assert dropped(lost, idempotent=True)
    assert not dropped(psycopg_pool.PoolTimeout("no connection"), idempotent=True)
    assert not dropped(errors.UniqueViolation("dup"), idempotent=True)
