"""Least privileges on the SQL stores: ``anarchon schema`` prints the DDL a DBA runs as the
tables' owner; with ``create_tables=False`` (``?create=0``) a store creates and alters
nothing, so a PostgreSQL role with only read/write rights on an existing schema runs
everything (tested with a real role made per test, dropped after); a namespace that
lacks a table is refused and nothing is created. SQLite likewise, and its one-slash URL
is refused."""

from __future__ import annotations

import asyncio
import sqlite3
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote, urlsplit, urlunsplit

import pytest

from anarchon import AsyncScheduler, RunContext, from_url
from anarchon.backends.capabilities import LivenessStore, ValueStore
from anarchon.backends.sqlite import SqliteBackend
from anarchon.errors import IncompatibleStoreError, StoreError
from tests.integration.backends.restricted import cli, run_every_call
from tests.stores import in_ci
from tests.stores.postgres import BASE_URL, STORE

# -- PostgreSQL ---------------------------------------------------------------------------


@pytest.fixture
def pg() -> None:
    reason = STORE.unavailable()
    if reason is not None:
        if in_ci():
            pytest.fail(f"CI requires PostgreSQL: {reason}")
        pytest.skip(reason)


def _admin(statement: str) -> None:
    import psycopg

    with psycopg.connect(BASE_URL, autocommit=True) as conn:
        conn.execute(statement.encode())  # bytes: no %-placeholders, several statements


def _url(base: str, table: str, extra: str = "") -> str:
    separator = "&" if "?" in base else "?"
    return f"{base}{separator}table={table}{extra}"


@pytest.fixture
def dml_role(pg: None) -> Iterator[tuple[str, str]]:
    """A schema made by the owner from ``anarchon schema``, and a login role with only
    USAGE on it and SELECT/INSERT/UPDATE/DELETE (and sequence USAGE) on its tables; yields
    (the role's server URL, the table option)."""
    tag = uuid.uuid4().hex[:10]
    schema, role, password = f"lp_{tag}", f"anarchon_lp_{tag}", f"pw{tag}"
    table = f"{schema}.runs"
    ddl = cli("schema", "--backend", _url(BASE_URL, table))
    assert ddl.returncode == 0, ddl.stderr
    _admin(ddl.stdout)
    _admin(ddl.stdout)  # idempotent: a DBA may run it again
    _admin(f"CREATE ROLE {role} LOGIN PASSWORD '{password}';"
           f"GRANT USAGE ON SCHEMA {schema} TO {role};"
           f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {schema} TO {role};"
           f"GRANT USAGE ON ALL SEQUENCES IN SCHEMA {schema} TO {role};")
    parts = urlsplit(BASE_URL)
    netloc = f"{role}:{quote(password)}@{parts.hostname}" + (
        f":{parts.port}" if parts.port else "")
    try:
        yield urlunsplit((parts.scheme, netloc, parts.path, parts.query, "")), table
    finally:
        _admin(f"DROP SCHEMA IF EXISTS {schema} CASCADE; DROP OWNED BY {role}; "
               f"DROP ROLE IF EXISTS {role}")


def test_a_read_write_role_fails_to_create_and_runs_everything_with_create_off(
        dml_role: tuple[str, str]) -> None:
    role_url, table = dml_role

    async def main() -> None:
        creating = from_url(_url(role_url, table))
        with pytest.raises(StoreError, match="permission denied"):
            await creating.open()  # CREATE ... IF NOT EXISTS needs CREATE on the schema
        await creating.close()

        await run_every_call(from_url(_url(role_url, table, "&create=0")), "least")

    asyncio.run(main())
    jobs = cli("jobs", "--backend", _url(role_url, table, "&create=0"))
    assert jobs.returncode == 0, jobs.stderr
    assert "tick" in jobs.stdout and "PAUSED" in jobs.stdout.upper()
    purge = cli("purge", "--yes", "--backend", _url(role_url, table, "&create=0"))
    assert purge.returncode == 0, purge.stderr


def test_create_off_refuses_missing_tables_and_creates_nothing(pg: None) -> None:
    import psycopg

    table = "t_lp_missing_" + uuid.uuid4().hex[:10]

    async def main() -> None:
        backend = from_url(_url(BASE_URL, table, "&create=0"))
        try:
            with pytest.raises(IncompatibleStoreError,
                               match=rf"create_tables is off .*{table}.*anarchon schema"):
                await backend.open()
        finally:
            await backend.close()

    asyncio.run(main())
    with psycopg.connect(BASE_URL, autocommit=True) as conn:
        rows = conn.execute("SELECT tablename FROM pg_tables WHERE tablename LIKE %s",
                            (table + "%",)).fetchall()
    assert rows == []


def test_the_ddl_names_every_table_the_store_makes(pg: None) -> None:
    """The DDL equals what a store with create on makes: same tables, same columns."""
    import psycopg

    tag = uuid.uuid4().hex[:10]
    made, printed = f"lp_made_{tag}", f"lp_printed_{tag}"

    async def made_by_the_store() -> None:
        backend = from_url(_url(BASE_URL, f"{made}.runs"))
        try:
            await backend.open()
            assert isinstance(backend, ValueStore)
            await backend.swap_value("job", "field", None, "x")  # the values table
            assert isinstance(backend, LivenessStore)
            await backend.instances()  # the liveness records' table
        finally:
            await backend.close()

    try:
        asyncio.run(made_by_the_store())
        _admin(from_url(_url(BASE_URL, f"{printed}.runs")).schema_sql())  # type: ignore[attr-defined]
        layout = ("SELECT table_name, column_name, data_type, is_nullable "
                  "FROM information_schema.columns WHERE table_schema = %s ORDER BY 1, 2")
        with psycopg.connect(BASE_URL, autocommit=True) as conn:
            first = conn.execute(layout, (made,)).fetchall()
            second = conn.execute(layout, (printed,)).fetchall()
        assert first and first == second
    finally:
        _admin(f"DROP SCHEMA IF EXISTS {made} CASCADE; DROP SCHEMA IF EXISTS {printed} CASCADE")


def test_create_is_a_flag(pg: None) -> None:
    with pytest.raises(ValueError, match="create must be 1 or 0"):
        from_url(_url(BASE_URL, "t_x", "&create=maybe"))
    assert from_url(_url(BASE_URL, "t_x", "&create=false")).create_tables is False  # type: ignore[attr-defined]
    assert from_url(_url(BASE_URL, "t_x")).create_tables is True  # type: ignore[attr-defined]


# -- SQLite -------------------------------------------------------------------------------


def test_sqlite_create_off(tmp_path: Path) -> None:
    path = tmp_path / "jobs.db"
    url = f"sqlite:///{path}?table=lp&create=0"

    async def claim_and_value() -> None:
        backend = from_url(url)
        assert isinstance(backend, SqliteBackend) and backend.create_tables is False
        scheduler = AsyncScheduler(backend, instance_id="least", lease="2s",
                                   heartbeat="0.3s", jitter=0)
        done = asyncio.Event()

        async def tick(ctx: RunContext) -> None:
            done.set()

        scheduler.every("tick", "0.2s", tick)
        await scheduler.start()
        try:
            await asyncio.wait_for(done.wait(), 10)
            assert await backend.swap_value("tick", "cursor", None, "1")
        finally:
            await scheduler.stop()
            await backend.close()

    async def refused() -> None:
        backend = from_url(url)
        try:
            with pytest.raises(IncompatibleStoreError, match="create_tables is off"):
                await backend.open()
        finally:
            await backend.close()

    asyncio.run(refused())
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT count(*) FROM sqlite_master").fetchone() == (0,)
    ddl = cli("schema", "--backend", url)
    assert ddl.returncode == 0, ddl.stderr
    with sqlite3.connect(path) as conn:
        conn.executescript(ddl.stdout)
    asyncio.run(claim_and_value())


def test_sqlite_one_slash_url_is_refused() -> None:
    for url in ("sqlite:/jobs.db", "sqlite:jobs.db"):
        with pytest.raises(ValueError, match="three slashes"):
            from_url(url)
    done = cli("jobs", "--backend", "sqlite:/jobs.db")
    assert done.returncode == 2
    assert "sqlite:////absolute/file.db" in done.stderr


def test_schema_of_a_store_without_tables_is_a_usage_error() -> None:
    done = cli("schema", "--backend", "redis://127.0.0.1:1/0")
    assert done.returncode == 2
    assert "keeps no SQL tables" in done.stderr


def test_schema_needs_no_server() -> None:
    started = time.monotonic()
    done = cli("schema", "--backend", "postgresql://nobody@192.0.2.1:1/db?table=s.t")
    assert done.returncode == 0, done.stderr
    assert 'CREATE TABLE IF NOT EXISTS "s"."t" (' in done.stdout
    assert time.monotonic() - started < 30
