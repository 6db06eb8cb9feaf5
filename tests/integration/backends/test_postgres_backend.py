"""The LeaseBackend contract, called directly on PostgresBackend against a real server.

Each test gets its own table namespace. Without a server the tests skip, in CI they fail.
Leases are ~300 ms; waiting is polling the store with a deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import tempfile
import time
import uuid
from collections.abc import Awaitable, Iterator
from typing import Any, Literal, TypeVar

import pytest

from anarchon.backends.base import (
    ClaimReason,
    ClaimRequest,
    ClaimResult,
    Finish,
    HeldRun,
    JobSpec,
    RunKey,
)
from anarchon.backends.control import ControlChange
from anarchon.errors import IncompatibleStoreError, StoreError
from tests.stores import in_ci
from tests.stores.postgres import BASE_URL, STORE

pytest.importorskip("psycopg")
pytest.importorskip("psycopg_pool")
import psycopg
import psycopg_pool
from psycopg import sql

from anarchon.backends import from_url
from anarchon.backends.postgres import PostgresBackend

T = TypeVar("T")
LEASE = 300
SUFFIXES = ("", "_attempts", "_jobs", "_meta", "_triggers", "_control", "_changes",
            "_offers")
CONTROL_SUFFIXES = ("_control", "_changes", "_offers")


@pytest.fixture(scope="module", autouse=True)
def _server() -> None:
    reason = STORE.unavailable()
    if reason is not None:
        if in_ci():
            pytest.fail(f"CI requires PostgreSQL: {reason}")
        pytest.skip(reason)


def run(coro: Awaitable[T]) -> T:
    async def main() -> T:
        return await coro
    return asyncio.run(main())


def admin(query: str, *params: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(BASE_URL, autocommit=True) as conn:
        cur = conn.execute(query, params or None)
        return list(cur.fetchall()) if cur.description else []


def drop(table: str) -> None:
    schema, _, base = table.rpartition(".")
    with psycopg.connect(BASE_URL, autocommit=True) as conn:
        for suffix in SUFFIXES:
            ident = (sql.Identifier(schema, base + suffix) if schema
                     else sql.Identifier(base + suffix))
            conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(ident))


@pytest.fixture
def table() -> Iterator[str]:
    name = "t_pgtest_" + uuid.uuid4().hex[:12]
    yield name
    drop(name)


def db_ms() -> int:
    [(ms,)] = admin("SELECT floor(extract(epoch FROM now()) * 1000)::bigint")
    return int(ms)


def request(slot: int, owner: str = "A", reason: ClaimReason = "scheduled", *,
            name: str = "job", lease_ms: int = LEASE, max_late_ms: int = 60_000,
            max_attempts: int = 3, overlap: Literal["skip", "allow"] = "skip",
            catch_up_ms: int = 0, expected_attempt: int = 0) -> ClaimRequest:
    return ClaimRequest(name=name, slot=slot, owner=owner, reason=reason, lease_ms=lease_ms,
                        max_late_ms=max_late_ms, max_attempts=max_attempts, overlap=overlap,
                        catch_up_ms=catch_up_ms, expected_attempt=expected_attempt)


def finish(slot: int, owner: str, attempt: int, *, name: str = "job",
           status: Literal["success", "failure", "interrupted"] = "success",
           history_size: int = 100, history_ttl_ms: int | None = None) -> Finish:
    return Finish(name=name, slot=slot, owner=owner, attempt=attempt, status=status,
                  error=None, history_size=history_size, history_ttl_ms=history_ttl_ms,
                  retain_runs_ms=86_400_000)


async def opened(table: str, connection: object = BASE_URL, **options: Any) -> PostgresBackend:
    backend = PostgresBackend(connection, table=table, **options)
    await backend.open()
    await backend.register([JobSpec("job", "every", "1s")])
    return backend


async def until_expired(backend: PostgresBackend, slot: int, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        states = [s for s in await backend.unfinished(["job"]) if s.slot == slot]
        if not states or states[0].lease_expired:
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"lease of slot {slot} did not expire within {timeout}s")


# -- claims -----------------------------------------------------------------------------


def test_claim_won_then_taken(table: str) -> None:
    async def main() -> None:
        a = await opened(table)
        try:
            slot = db_ms()
            assert (await a.claim(request(slot, "A"))).outcome == "won"
            lost = await a.claim(request(slot, "B"))
            assert (lost.outcome, lost.attempt) == ("taken", 0)
            assert await a.confirm(request(slot, "A")) == 1
            assert await a.confirm(request(slot, "B")) == 0
            [record] = await a.history("job", 10)
            assert (record.instance_id, record.attempt, record.status, record.reason) == (
                "A", 1, "running", "scheduled")
        finally:
            await a.close()
    run(main())


def test_late_is_judged_by_database_time(table: str) -> None:
    async def main() -> None:
        a = await opened(table)
        try:
            slot = db_ms() - 5_000  # the client's clock plays no part
            late = await a.claim(request(slot, max_late_ms=1_000))
            assert late.outcome == "late"
            assert abs(late.store_ms - db_ms()) < 2_000
            assert (await a.claim(request(slot, max_late_ms=60_000))).outcome == "won"
        finally:
            await a.close()
    run(main())


def test_overlap_skip_is_final_and_allow_runs(table: str) -> None:
    async def main() -> None:
        a = await opened(table)
        try:
            first = db_ms()  # slots 100 ms apart: none is early (EARLY_TOLERANCE_MS)
            assert (await a.claim(request(first, "A", lease_ms=60_000))).outcome == "won"
            assert (await a.claim(request(first + 100, "B"))).outcome == "overlap"
            # the skipped slot is recorded: it never runs later, for anyone
            await a.finish(finish(first, "A", 1))
            assert (await a.claim(request(first + 100, "C"))).outcome == "overlap"
            assert (await a.claim(request(first + 100, "C", "catch-up",
                                          catch_up_ms=60_000))).outcome == "overlap"
            second = first + 200
            assert (await a.claim(request(second, "A", lease_ms=60_000))).outcome == "won"
            allowed = await a.claim(request(second + 20, "B", overlap="allow"))
            assert (allowed.outcome, allowed.attempt) == ("won", 1)
        finally:
            await a.close()
    run(main())


def test_overlap_race_across_slots_is_serialised(table: str) -> None:
    """Claims of different slots of one job at once: the job lock lets exactly one run."""
    async def main() -> None:
        backends = [await opened(table) for _ in range(3)]
        try:
            base = db_ms()
            results = await asyncio.gather(*(
                b.claim(request(base + i, f"I{i}", lease_ms=60_000))
                for i, b in enumerate(backends * 4)))
            assert sorted(r.outcome for r in results).count("won") == 1
        finally:
            for b in backends:
                await b.close()
    run(main())


def test_expired_earlier_run_is_interrupted_by_next_slot(table: str) -> None:
    async def main() -> None:
        a = await opened(table)
        try:
            slot = db_ms() - 5_000
            assert (await a.claim(request(slot, "A"))).outcome == "won"
            await until_expired(a, slot)
            assert (await a.claim(request(slot + 1000, "B"))).outcome == "won"
            statuses = {(r.slot, r.status) for r in await a.history("job", 10)}
            assert statuses == {(slot, "interrupted"), (slot + 1000, "running")}
            assert [s.slot for s in await a.unfinished(["job"])] == [slot + 1000]
        finally:
            await a.close()
    run(main())


def test_catch_up_needs_job_known_before_slot(table: str) -> None:
    async def main() -> None:
        a = await opened(table)
        try:
            before_seen = db_ms() - 10_000
            refused = await a.claim(request(before_seen, reason="catch-up", catch_up_ms=60_000))
            assert refused.outcome == "late"
            await asyncio.sleep(0.01)
            slot = db_ms()
            assert (await a.claim(request(slot, reason="catch-up",
                                          catch_up_ms=60_000))).outcome == "won"
            too_old = await a.claim(request(slot - 120_000, reason="catch-up",
                                            catch_up_ms=60_000))
            assert too_old.outcome == "late"
        finally:
            await a.close()
    run(main())


def test_takeover_only_after_expiry_one_winner_of_five(table: str) -> None:
    async def main() -> None:
        a = await opened(table)
        # separate backends = separate pools = separate connections
        backups = [await opened(table) for _ in range(5)]
        try:
            slot = db_ms()
            assert (await a.claim(request(slot, "A"))).outcome == "won"
            early = await backups[0].claim(request(slot, "B0", "takeover", expected_attempt=1))
            assert early.outcome == "taken"
            await until_expired(a, slot)
            results = await asyncio.gather(*(
                b.claim(request(slot, f"B{i}", "takeover", expected_attempt=1))
                for i, b in enumerate(backups)))
            winners = [r for r in results if r.outcome == "won"]
            assert len(winners) == 1 and winners[0].attempt == 2
            assert sorted(r.outcome for r in results).count("taken") == 4
            # a takeover at a stale expected_attempt never wins
            stale = await a.claim(request(slot, "A", "takeover", expected_attempt=1))
            assert stale.outcome == "taken"
            hb = await a.heartbeat("A", [HeldRun("job", slot, 1)], [], LEASE)
            assert hb.lost == {RunKey("job", slot)}
            records = {r.attempt: r for r in await a.history("job", 10)}
            assert records[1].status == "interrupted"
            assert (records[2].status, records[2].reason) == ("running", "takeover")
        finally:
            for b in [a, *backups]:
                await b.close()
    run(main())


def test_exhausted_after_max_attempts(table: str) -> None:
    async def main() -> None:
        a = await opened(table)
        try:
            slot = db_ms()
            assert (await a.claim(request(slot, "A", max_attempts=2))).outcome == "won"
            await until_expired(a, slot)
            second = await a.claim(request(slot, "B", "takeover", max_attempts=2,
                                           expected_attempt=1))
            assert (second.outcome, second.attempt) == ("won", 2)
            await until_expired(a, slot)
            third = await a.claim(request(slot, "C", "takeover", max_attempts=2,
                                          expected_attempt=2))
            assert third.outcome == "exhausted"
            assert await a.unfinished(["job"]) == []
            assert {r.status for r in await a.history("job", 10)} == {"interrupted"}
            again = await a.claim(request(slot, "C", "takeover", max_attempts=2,
                                          expected_attempt=2))
            assert again.outcome == "taken"
        finally:
            await a.close()
    run(main())


def test_hand_over_is_not_counted(table: str) -> None:
    async def main() -> None:
        a = await opened(table)
        try:
            slot = db_ms()
            assert (await a.claim(request(slot, "A", max_attempts=1))).outcome == "won"
            assert await a.release("A", HeldRun("job", slot, 1)) is True
            assert await a.release("A", HeldRun("job", slot, 1)) is False  # fenced
            [state] = await a.unfinished(["job"])
            assert state.handed_over and state.lease_expired
            # no waiting for a lease: the hand-over expired it, and it does not count
            won = await a.claim(request(slot, "B", "takeover", max_attempts=1,
                                        expected_attempt=1))
            assert (won.outcome, won.attempt) == ("won", 2)
            hb = await a.heartbeat("A", [HeldRun("job", slot, 1)], [], LEASE)
            assert hb.lost == {RunKey("job", slot)}
            assert not await a.finish(finish(slot, "A", 1))
            await until_expired(a, slot)
            # attempt 2 counted: with max_attempts=1 the next takeover is refused
            third = await a.claim(request(slot, "C", "takeover", max_attempts=1,
                                          expected_attempt=2))
            assert third.outcome == "exhausted"
        finally:
            await a.close()
    run(main())


# -- heartbeat, finish, history -------------------------------------------------------


def test_heartbeat_renews_in_one_statement_and_reports_lost(table: str) -> None:
    async def main() -> None:
        counter = _Counter()
        conn = await counter.connect()
        a = await opened(table, conn)
        b = await opened(table)
        try:
            slot, other = db_ms(), db_ms() + 1
            assert (await a.claim(request(slot, "A", overlap="allow"))).outcome == "won"
            assert (await b.claim(request(other, "B", overlap="allow"))).outcome == "won"
            counter.count = 0
            hb = await a.heartbeat("A", [HeldRun("job", slot, 1), HeldRun("job", other, 1)],
                                   [RunKey("job", other)], 60_000)
            assert counter.count == 1
            assert hb.lost == {RunKey("job", other)}  # held by B, not A
            [watched] = hb.watched
            assert (watched.owner, watched.attempt, watched.running) == ("B", 1, True)
            assert not watched.lease_expired
            # renewed to 60 s: still valid long after the 300 ms claim lease
            await until_expired(b, other)
            states = {s.slot: s for s in await a.unfinished(["job"])}
            assert not states[slot].lease_expired
            refused = await b.claim(request(slot, "B", "takeover", expected_attempt=1))
            assert refused.outcome == "taken"
        finally:
            await a.close()
            await b.close()
            await conn.close()
    run(main())


def test_finish_is_fenced(table: str) -> None:
    async def main() -> None:
        a = await opened(table)
        try:
            slot = db_ms()
            await a.claim(request(slot, "A"))
            await until_expired(a, slot)
            await a.claim(request(slot, "B", "takeover", expected_attempt=1))
            before = await a.history("job", 10)
            assert not await a.finish(finish(slot, "A", 1, status="failure"))
            assert not await a.finish(finish(slot, "B", 1))  # right owner, wrong attempt
            assert await a.history("job", 10) == before
            assert await a.finish(finish(slot, "B", 2))
            assert not await a.finish(finish(slot, "B", 2))  # once only
            newest = (await a.history("job", 1))[0]
            assert (newest.attempt, newest.status) == (2, "success")
            assert newest.duration is not None and newest.duration >= 0
        finally:
            await a.close()
    run(main())


def test_history_pruning_never_deletes_running(table: str) -> None:
    async def main() -> None:
        a = await opened(table)
        try:
            base = db_ms() - 30_000
            # the oldest attempt stays running (overlap allowed), then 5 finished ones
            await a.claim(request(base, "R", overlap="allow", lease_ms=60_000))
            for i in range(1, 6):
                await a.claim(request(base + i, "A", overlap="allow", lease_ms=60_000))
                assert await a.finish(finish(base + i, "A", 1, history_size=2))
            records = await a.history("job", 100)
            assert base in {r.slot for r in records if r.status == "running"}
            assert len(records) <= 3  # the 2 newest + the running one
            token = await a.start_manual("job", "M", db_ms())
            await a.finish_manual(token, "success", None, 1, 1)  # ttl 1 ms
            records = await a.history("job", 100)
            assert any(r.slot == base and r.status == "running" for r in records)
            assert [r.manual for r in records if r.status != "running"] == [True]
        finally:
            await a.close()
    run(main())


def test_manual_runs_and_known_jobs_from_a_process_without_jobs(table: str) -> None:
    async def main() -> None:
        a = await opened(table)
        reader = PostgresBackend(BASE_URL, table=table)  # never registers anything
        try:
            token = await a.start_manual("job", "M", db_ms())
            await a.finish_manual(token, "failure", "boom", 10, None)
            [record] = await reader.history("job", 5)
            assert (record.manual, record.reason, record.status, record.error) == (
                True, "manual", "failure", "boom")
            assert [j.name for j in await reader.known_jobs()] == ["job"]
        finally:
            await a.close()
            await reader.close()
    run(main())


# -- tables, namespaces, connections ----------------------------------------------------


def test_schema_qualified_table() -> None:
    schema = "s_pgtest_" + uuid.uuid4().hex[:8]
    table = f"{schema}.runs"

    async def main() -> None:
        a = await opened(table)
        try:
            assert (await a.claim(request(db_ms(), "A"))).outcome == "won"
        finally:
            await a.close()
    try:
        run(main())
        names = {r[0] for r in admin(
            "SELECT tablename FROM pg_tables WHERE schemaname = %s", schema)}
        assert names == {"runs", "runs_attempts", "runs_jobs", "runs_meta", "runs_triggers",
                         "runs_control", "runs_changes", "runs_offers"}
    finally:
        admin(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(
            sql.Identifier(schema)).as_string(None))


def test_two_tables_are_isolated(table: str) -> None:
    other = table + "_b"

    async def main() -> None:
        a = await opened(table)
        b = PostgresBackend(BASE_URL, table=other)
        await b.open()
        try:
            slot = db_ms()
            assert (await a.claim(request(slot, "A"))).outcome == "won"
            assert (await b.claim(request(slot, "B"))).outcome == "won"
            assert await b.known_jobs() == []
            assert [r.instance_id for r in await b.history("job", 5)] == ["B"]
        finally:
            await a.close()
            await b.close()
    try:
        run(main())
    finally:
        drop(other)


def test_other_format_version_is_refused_and_untouched(table: str) -> None:
    admin(sql.SQL("CREATE TABLE {} (key text PRIMARY KEY, value text NOT NULL)").format(
        sql.Identifier(table + "_meta")).as_string(None))
    admin(sql.SQL("INSERT INTO {} VALUES ('format_version', '99')").format(
        sql.Identifier(table + "_meta")).as_string(None))
    with pytest.raises(IncompatibleStoreError, match="'99'"):
        run(PostgresBackend(BASE_URL, table=table).open())
    assert admin("SELECT to_regclass(%s)", table) == [(None,)]
    assert admin(sql.SQL("SELECT * FROM {}").format(
        sql.Identifier(table + "_meta")).as_string(None)) == [("format_version", "99")]


def test_foreign_tables_are_refused_and_untouched(table: str) -> None:
    admin(sql.SQL("CREATE TABLE {} (id int)").format(
        sql.Identifier(table + "_meta")).as_string(None))
    with pytest.raises(IncompatibleStoreError, match="not an anarchon"):
        run(PostgresBackend(BASE_URL, table=table).open())
    drop(table)
    admin(sql.SQL("CREATE TABLE {} (id int)").format(sql.Identifier(table)).as_string(None))
    with pytest.raises(IncompatibleStoreError, match="without an anarchon"):
        run(PostgresBackend(BASE_URL, table=table).open())
    assert admin("SELECT to_regclass(%s)", table + "_meta") == [(None,)]


def test_three_instances_create_tables_at_once(table: str) -> None:
    async def main() -> None:
        backends = [PostgresBackend(BASE_URL, table=table) for _ in range(3)]
        try:
            await asyncio.gather(*(b.open() for b in backends))
        finally:
            for b in backends:
                await b.close()
    run(main())


def test_registration_times_join_a_jobs_table_made_without_them(table: str) -> None:
    """A namespace of an anarchon before registration refreshes (same format version)
    gains the ``registered`` column at open(); its jobs stay, with no time until an
    instance registers them again."""
    async def main() -> None:
        a = await opened(table)
        await a.close()
        admin(sql.SQL("ALTER TABLE {} DROP COLUMN registered").format(
            sql.Identifier(table + "_jobs")).as_string(None))
        b = PostgresBackend(BASE_URL, table=table)
        await b.open()
        try:
            [spec] = await b.known_jobs()
            assert spec.name == "job" and spec.registered_ms is None
            await b.register([JobSpec("job", "every", "every 1s")])
            [spec] = await b.known_jobs()
            assert spec.registered_ms is not None and abs(spec.registered_ms - db_ms()) < 60_000
        finally:
            await b.close()
    run(main())


def test_control_tables_join_a_namespace_made_without_them(table: str) -> None:
    """A namespace of an anarchon before runtime control (same format version) gains the
    control tables at open(); its runs stay."""
    async def main() -> None:
        a = await opened(table)
        slot = db_ms()
        assert (await a.claim(request(slot, "A"))).outcome == "won"
        await a.close()
        for suffix in CONTROL_SUFFIXES:
            admin(sql.SQL("DROP TABLE {}").format(
                sql.Identifier(table + suffix)).as_string(None))
        b = await opened(table)
        try:
            assert await b.change_control(ControlChange("job", 0, "{}", "{}")) == 1
            assert (await b.claim(request(slot + 1, "B"))).outcome == "stale"
            assert [s.slot for s in await b.unfinished(["job"])] == [slot]
        finally:
            await b.close()
    run(main())
    for suffix in CONTROL_SUFFIXES:
        assert admin("SELECT to_regclass(%s) IS NOT NULL", table + suffix) == [(True,)]
    assert admin(sql.SQL("SELECT value FROM {} WHERE key = 'format_version'").format(
        sql.Identifier(table + "_meta")).as_string(None)) == [("1",)]


def test_user_async_pool_survives_close(table: str) -> None:
    async def main() -> None:
        pool = psycopg_pool.AsyncConnectionPool(BASE_URL, min_size=1, max_size=3, open=False)
        await pool.open(wait=True)
        try:
            a = await opened(table, pool)
            slot = db_ms()
            assert (await a.claim(request(slot, "A"))).outcome == "won"
            hb = await a.heartbeat("A", [HeldRun("job", slot, 1)], [], LEASE)
            assert not hb.lost
            await a.close()
            async with pool.connection() as conn:
                cur = await conn.execute("SELECT 1")
                assert await cur.fetchone() == (1,)
            assert pool.get_stats().get("pool_size", 1) >= 1
        finally:
            await pool.close()
    run(main())


def test_user_sync_pool_and_connection(table: str) -> None:
    pool = psycopg_pool.ConnectionPool(BASE_URL, min_size=1, max_size=2, open=True)
    conn = psycopg.connect(BASE_URL, autocommit=True)
    try:
        async def main() -> None:
            a = await opened(table, pool)
            b = await opened(table, conn)
            slot = db_ms()
            results = await asyncio.gather(a.claim(request(slot, "A")),
                                           b.claim(request(slot, "B")))
            assert sorted(r.outcome for r in results) == ["taken", "won"]
            hb = await a.heartbeat("A", [HeldRun("job", slot, 1)], [], LEASE)
            assert hb.lost == ({RunKey("job", slot)} if results[1].outcome == "won" else set())
            await a.close()
            await b.close()
        run(main())
        with pool.connection() as c:
            assert c.execute("SELECT 1").fetchone() == (1,)
        assert conn.execute("SELECT 1").fetchone() == (1,)
    finally:
        pool.close()
        conn.close()


def test_non_autocommit_connection_is_refused(table: str) -> None:
    conn = psycopg.connect(BASE_URL)
    try:
        with pytest.raises(ValueError, match="autocommit"):
            run(PostgresBackend(conn, table=table).open())
        assert not conn.closed
    finally:
        conn.close()


def test_bad_address_fails_clearly_at_open() -> None:
    backend = PostgresBackend("postgresql://postgres:s3cret@127.0.0.1:1/test",
                              connect_timeout=2)
    with pytest.raises(StoreError) as info:
        run(backend.open())
    assert "127.0.0.1:1" in str(info.value) and "s3cret" not in str(info.value)
    missing_db = BASE_URL.rsplit("/", 1)[0] + "/no_such_db_anarchon"
    with pytest.raises(StoreError, match="no_such_db_anarchon"):
        run(PostgresBackend(missing_db).open())


def test_from_url_strips_anarchon_options(table: str) -> None:
    async def main() -> None:
        backend = from_url(f"{BASE_URL}?table={table}&pool_size=2&connect_timeout=3")
        assert isinstance(backend, PostgresBackend)
        assert backend.table == table and backend.name == "postgres"
        await backend.open()  # libpq would refuse an unknown 'table' parameter
        await backend.close()
    run(main())


def test_no_io_and_bad_options_at_construction() -> None:
    PostgresBackend("postgresql://nobody@256.0.0.1:1/none")  # nothing is contacted
    with pytest.raises(ValueError, match="invalid table"):
        PostgresBackend(BASE_URL, table="bad-name; DROP TABLE x")
    with pytest.raises(TypeError):
        PostgresBackend(BASE_URL, table=3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="DSN"):
        run(PostgresBackend(object()).open())


def test_connections_killed_mid_run_recover(table: str) -> None:
    """Like a database restart: the next calls may fail with StoreError, then the pool
    and the heartbeat connection reconnect and the lease is still fenced correctly."""
    app = "pgtest_" + uuid.uuid4().hex[:8]
    separator = "&" if "?" in BASE_URL else "?"

    async def main() -> None:
        a = await opened(table, f"{BASE_URL}{separator}application_name={app}")
        try:
            slot = db_ms()
            assert (await a.claim(request(slot, "A", lease_ms=60_000))).outcome == "won"
            held = [HeldRun("job", slot, 1)]
            assert not (await a.heartbeat("A", held, [], 60_000)).lost
            killed = admin("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                           "WHERE application_name = %s", app)
            assert killed
            deadline = time.monotonic() + 10
            while True:
                try:
                    hb = await a.heartbeat("A", held, [], 60_000)
                    break
                except StoreError:
                    assert time.monotonic() < deadline
                    await asyncio.sleep(0.05)
            assert not hb.lost
            for _ in range(3):  # pool connections are checked before use
                with contextlib.suppress(StoreError):
                    await a.claim(request(slot + 1, "A", overlap="allow"))
            assert (await a.claim(request(slot + 2, "A", overlap="allow"))).outcome == "won"
            assert await a.finish(finish(slot, "A", 1))
        finally:
            await a.close()
    run(main())


# -- load and cost ----------------------------------------------------------------------


def test_fifty_jobs_same_second_three_backends(table: str) -> None:
    async def main() -> None:
        backends = [await opened(table) for _ in range(3)]
        try:
            names = [f"job{i}" for i in range(50)]
            await backends[0].register([JobSpec(n, "every", "1m") for n in names])
            slot = db_ms()
            claims = [b.claim(request(slot, f"I{k}", name=n))
                      for n in names for k, b in enumerate(backends)]
            results = await asyncio.gather(*claims)  # any error (deadlock …) fails here
            for i, name in enumerate(names):
                outcomes = sorted(r.outcome for r in results[i * 3:i * 3 + 3])
                assert outcomes == ["taken", "taken", "won"], (name, outcomes)
        finally:
            for b in backends:
                await b.close()
    run(main())


class _Counter:
    """Counts statements sent through a user AsyncConnection (its cursor executes)."""

    def __init__(self) -> None:
        self.count = 0

    async def connect(self) -> Any:
        counter = self

        class Cursor(psycopg.AsyncCursor[Any]):
            async def execute(self, *args: Any, **kwargs: Any) -> Any:
                counter.count += 1
                return await super().execute(*args, **kwargs)

        return await psycopg.AsyncConnection.connect(BASE_URL, autocommit=True,
                                                     cursor_factory=Cursor)


def test_claim_cost_and_latency(table: str, capsys: pytest.CaptureFixture[str]) -> None:
    """One round trip (one Sync) and 3 statements per claim (the transaction's generic-plan
    setting, the job's lock, the claim); latency with 3 contenders."""
    async def main() -> None:
        counter = _Counter()
        conn = await counter.connect()
        a = await opened(table, conn)
        others = [await opened(table) for _ in range(2)]
        try:
            counter.count = 0
            with _SyncTrace(conn) as trace:
                await a.claim(request(db_ms(), "A"))
            statements, syncs = counter.count, trace.syncs
            latencies: list[float] = []
            backends = [a, *others]

            async def timed(b: PostgresBackend, slot: int, owner: str) -> ClaimResult:
                t0 = time.perf_counter()
                result = await b.claim(request(slot, owner, overlap="allow"))
                latencies.append((time.perf_counter() - t0) * 1000)
                return result

            base = db_ms() + 10
            for i in range(200):
                results = await asyncio.gather(*(timed(b, base + i, f"I{k}")
                                                  for k, b in enumerate(backends)))
                assert [r.outcome for r in results].count("won") == 1
            latencies.sort()
            median = statistics.median(latencies)
            p99 = latencies[int(len(latencies) * 0.99) - 1]
            with capsys.disabled():
                print(f"\npostgres claim: {statements} statements, {syncs} round trip(s); "
                      f"latency with 3 contenders over {len(latencies)} claims: "
                      f"median {median:.2f} ms, p99 {p99:.2f} ms")
            assert statements == 3
            assert syncs in (1, -1)  # -1: libpq tracing unavailable
        finally:
            for b in [a, *others]:
                await b.close()
            await conn.close()
    run(main())


def test_control_calls_are_one_round_trip(table: str) -> None:
    """poll (triggers + generation) is one statement; a change and an exclusive trigger
    request are the lock and one statement in one round trip; a claim fenced as stale
    stays 3 statements (generic-plan setting, lock, claim), 1 round trip."""
    async def main() -> None:
        counter = _Counter()
        conn = await counter.connect()
        a = await opened(table, conn)
        try:
            cost: dict[str, tuple[int, int]] = {}

            async def measured(what: str, call: Awaitable[Any]) -> Any:
                counter.count = 0
                with _SyncTrace(conn) as trace:
                    answer = await call
                cost[what] = (counter.count, trace.syncs)
                return answer

            assert (await measured("idle poll", a.poll(["job"]))).generation == 0
            assert await measured("change", a.change_control(
                ControlChange("job", 0, "{}", "{}"))) == 1
            await measured("trigger", a.request_trigger("job", None, exclusive=True))
            polled = await measured("poll", a.poll(["job"]))
            assert len(polled.triggers) == 1 and polled.generation == 1
            stale = await measured("stale claim", a.claim(request(db_ms(), "A")))
            assert stale.outcome == "stale"
            for what, (statements, syncs) in cost.items():
                assert syncs in (1, -1), (what, syncs)  # -1: libpq tracing unavailable
                assert statements == {"change": 2, "trigger": 2,
                                      "stale claim": 3}.get(what, 1), what
        finally:
            await a.close()
            await conn.close()
    run(main())


class _SyncTrace:
    """Counts the Sync messages (round trips) a connection sends, from a libpq trace."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self.file = tempfile.NamedTemporaryFile("w+", suffix=".pgtrace")  # noqa: SIM115
        self.syncs = -1  # stays -1 when libpq cannot trace

    def __enter__(self) -> _SyncTrace:
        try:
            self.conn.pgconn.trace(self.file.fileno())
            self.conn.pgconn.set_trace_flags(psycopg.pq.Trace.SUPPRESS_TIMESTAMPS)
        except Exception:
            self.conn = None
        return self

    def __exit__(self, *exc: object) -> None:
        if self.conn is not None:
            self.conn.pgconn.untrace()  # flushes libpq's buffer
            with open(self.file.name) as f:
                self.syncs = sum(1 for line in f
                                 if line.startswith("F\t") and "\tSync" in line)
        self.file.close()
