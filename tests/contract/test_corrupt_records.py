"""Reads survive bad data (issue 34, item 5), on every lease store that can hold it.

Real garbage is written into the real store beside records anarchon wrote: an attempt
record that does not decode (Redis/Valkey: not JSON; SQLite: text where a time belongs;
PostgreSQL, MariaDB: a status anarchon never writes, a slot no date can hold) and a job
registration of the wrong type. ``history()`` and ``known_jobs()`` return every other
record and log the bad one once (WARNING, naming the key or row); a second read logs
nothing new. On Redis/Valkey a key of another type (WRONGTYPE) is a data error, never
"store not answering".
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import time
from collections.abc import Callable
from typing import Any

import pytest

from anarchon import AsyncScheduler
from anarchon.backends.base import Backend, JobSpec, LeaseBackend
from anarchon.backends.redis import RedisBackend
from anarchon.errors import StoreDataError
from anarchon.testing.claims import finish, request
from tests.conftest import only_lease_stores
from tests.stores import StoreSpec
from tests.support import run

NAME = "job"
SLOTS = 4


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == "anarchon" and r.levelno == logging.WARNING]


async def _with_history(backend: LeaseBackend) -> list[int]:
    """Register two jobs and record ``SLOTS`` finished attempts of ``NAME``."""
    await backend.register([JobSpec(NAME, "every", "every 1s"),
                            JobSpec("other", "every", "every 1s")])
    base = int(time.time() * 1000) - 10_000
    slots = [base + 1000 * n for n in range(SLOTS)]
    for slot in slots:
        won = await backend.claim(request(NAME, slot, "i1"))
        assert won.outcome == "won", won
        assert await backend.finish(finish(NAME, slot, "i1", won.attempt))
    return slots


def _sql(backend: Any, statement: str, params: tuple[Any, ...]) -> None:
    """Run ``statement`` ({attempts}, {jobs}: the backend's tables) on its own database,
    from this thread, outside anarchon."""
    kind = type(backend).__name__
    if kind == "SqliteBackend":
        tables = backend._tables
        with sqlite3.connect(backend.database) as connection:
            connection.execute(statement.format(attempts=tables.attempts, jobs=tables.jobs),
                               params)
        connection.close()
    elif kind == "PostgresBackend":
        import psycopg

        with psycopg.connect(backend._connection, autocommit=True) as pg:
            regclass = backend._tables.regclass
            pg.execute(statement.replace("?", "%s").format(
                attempts=regclass["attempts"], jobs=regclass["jobs"]), params)
    else:  # the Django store: its alias, its model tables
        from django.db import connections

        with connections[backend.alias].cursor() as cursor:
            cursor.execute(statement.replace("?", "%s").format(
                attempts="anarchon_django_store_attempt", jobs="anarchon_django_store_job"),
                params)
        connections[backend.alias].close()


def _on_sqlite(backend: Any) -> bool:
    return type(backend).__name__ == "SqliteBackend" or getattr(backend, "name", "") == \
        "django:sqlite"


async def _corrupt_attempt(spec: StoreSpec, backend: Any, slot: int) -> str:
    """Make the attempt record of ``slot`` unreadable; what the WARNING must name."""
    if isinstance(backend, RedisBackend):
        key = backend.store.keys(NAME).att
        await backend.store.command("HSET", key, f"{slot}:1", "{not json")
        return key
    if _on_sqlite(backend):
        # SQLite keeps any type: a text where the slot's time belongs
        await asyncio.to_thread(_sql, backend, "UPDATE {attempts} SET slot = ? "
                                "WHERE job = ? AND slot = ?", ("garbage", NAME, slot))
        return "garbage"
    await asyncio.to_thread(_sql, backend, "UPDATE {attempts} SET status = ? "
                            "WHERE job = ? AND slot = ?", ("bogus", NAME, slot))
    return "bogus"


async def _corrupt_job(spec: StoreSpec, backend: Any) -> str | None:
    """Make the registration of job ``other`` unreadable (None: the store's column types
    forbid every unreadable value)."""
    if isinstance(backend, RedisBackend):
        await backend.store.command("HSET", backend.store.jobs_key, "other", "[1, 2")
        return backend.store.jobs_key
    if _on_sqlite(backend):
        await asyncio.to_thread(_sql, backend, "UPDATE {jobs} SET updated = ? "
                                "WHERE name = ?", ("not a time", "other"))
        return "not a time"
    return None


def test_one_unreadable_attempt_is_skipped_and_logged_once(
        lease_store: StoreSpec, make_backend: Callable[[], Backend],
        caplog: pytest.LogCaptureFixture) -> None:
    async def scenario() -> None:
        backend = make_backend()
        assert isinstance(backend, LeaseBackend)
        await backend.open()
        try:
            slots = await _with_history(backend)
            bad = slots[1]
            named = await _corrupt_attempt(lease_store, backend, bad)
            with caplog.at_level(logging.WARNING, logger="anarchon"):
                first = await backend.history(NAME, 10)
                second = await backend.history(NAME, 10)
            for records in (first, second):
                assert sorted(r.slot for r in records if r.slot in slots) == \
                    [s for s in slots if s != bad]
                assert all(r.status == "success" for r in records)
            [warning] = [m for m in _warnings(caplog) if "skipped a record" in m]
            assert named in warning, warning
            assert "not answering" not in " ".join(_warnings(caplog))
        finally:
            await backend.close()

    run(scenario())


def test_one_unreadable_job_registration_is_skipped_and_logged_once(
        lease_store: StoreSpec, make_backend: Callable[[], Backend],
        caplog: pytest.LogCaptureFixture) -> None:
    async def scenario() -> None:
        backend = make_backend()
        assert isinstance(backend, LeaseBackend)
        await backend.open()
        try:
            await _with_history(backend)
            named = await _corrupt_job(lease_store, backend)
            with caplog.at_level(logging.WARNING, logger="anarchon"):
                first = await backend.known_jobs()
                second = await backend.known_jobs()
            if named is None:  # typed columns: nothing unreadable can be stored
                assert {j.name for j in first} == {NAME, "other"}
                return
            for jobs in (first, second):
                assert [j.name for j in jobs] == [NAME]
            [warning] = [m for m in _warnings(caplog) if "skipped a record" in m]
            assert named in warning and "other" in warning, warning
        finally:
            await backend.close()

    run(scenario())


@only_lease_stores("redis", "valkey", "sqlite")
def test_jobs_of_a_scheduler_skip_an_unreadable_registration(
        lease_store: StoreSpec, make_backend: Callable[[], Backend],
        caplog: pytest.LogCaptureFixture) -> None:
    """``jobs()`` (what ``anarchon jobs`` prints) of a scheduler that declares only one
    of the jobs still lists it when another job's registration is garbage."""
    async def scenario() -> None:
        writer = make_backend()
        assert isinstance(writer, LeaseBackend)
        await writer.open()
        await _with_history(writer)
        await _corrupt_job(lease_store, writer)
        await writer.close()
        scheduler = AsyncScheduler(make_backend())
        scheduler.every(NAME, "1h", lambda ctx: None)
        with caplog.at_level(logging.WARNING, logger="anarchon"):
            jobs = await scheduler.jobs()
            records = await scheduler.history(NAME, 10)
        await scheduler.stop()
        assert [j.name for j in jobs] == [NAME]
        assert len(records) == SLOTS

    run(scenario())


@only_lease_stores("redis", "valkey")
def test_a_key_of_another_type_is_a_data_error_not_an_outage(
        make_backend: Callable[[], Backend], caplog: pytest.LogCaptureFixture) -> None:
    """WRONGTYPE on a job's keys: ``history()`` raises ``StoreDataError`` naming the
    prefix, and a running scheduler's failing claims log one "holds data anarchon cannot
    read" WARNING, never "store not answering"."""
    async def scenario() -> None:
        backend = make_backend()
        assert isinstance(backend, RedisBackend)
        await backend.open()
        keys = backend.store.keys(NAME)
        for key in (keys.runs, keys.att, keys.hist):
            await backend.store.command("SET", key, "a string, not a hash")
        with pytest.raises(StoreDataError, match="WRONGTYPE"):
            await backend.history(NAME, 10)
        scheduler = AsyncScheduler(make_backend(), lease=2, heartbeat=0.5)
        errors: list[BaseException | None] = []
        scheduler.on("error", lambda event: errors.append(event.error))
        scheduler.every(NAME, "0.2s", lambda ctx: None, jitter=0)
        with caplog.at_level(logging.INFO, logger="anarchon"):
            await scheduler.start()
            deadline = time.monotonic() + 10
            while len(errors) < 3:
                assert time.monotonic() < deadline, "no failed claim within 10 s"
                await asyncio.sleep(0.05)
            await scheduler.stop()
        await backend.close()
        assert all(isinstance(e, StoreDataError) for e in errors), errors
        warnings = _warnings(caplog)
        assert not [m for m in warnings if "not answering" in m], warnings
        data = [m for m in warnings if "holds data anarchon cannot read" in m]
        assert len(data) == 1 and "WRONGTYPE" in data[0], warnings

    run(scenario())
