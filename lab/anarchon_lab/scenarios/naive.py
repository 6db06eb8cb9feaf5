"""The naive comparison claim for SQL stores: a unique insert, no lease.

This is how Meteor's SyncedCron (and many hand-written cron locks) pick a runner: every
instance INSERTs ``(job, slot)`` into a table with a unique key and the one whose insert
succeeds runs the slot. Nothing renews anything, so nothing notices a dead or frozen
runner: its row stays ``running`` forever and nobody retries the slot. There is no
lateness check either (SyncedCron has none). Only ``anarchon scenarios`` uses these
backends, to show the difference a lease makes; they are not meant for production.

URLs: ``naive+sqlite:///path.db?table=name`` and ``naive+postgresql://...?table=name``
(see ``anarchon_lab.scenarios.stores.build_backend()``).
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from abc import abstractmethod
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from anarchon.backends.base import ClaimBackend, ClaimRequest, ClaimResult, Finish, JobSpec
from anarchon.backends.frameworks import stored_kind, stored_spec
from anarchon.backends.sqlite.wal import use_wal
from anarchon.clock import SYSTEM_CLOCK
from anarchon.errors import StoreError
from anarchon.history import RunRecord, RunStatus
from anarchon.jobs.name_checks import check_table_name
from anarchon.schedules.kinds import ms_to_datetime

Row = Sequence[Any]

# Statements use {runs} and {jobs} for the quoted table names and {p} for a placeholder.
_CREATE = (
    """CREATE TABLE IF NOT EXISTS {runs} (
        job TEXT NOT NULL, slot BIGINT NOT NULL, manual INTEGER NOT NULL,
        owner TEXT NOT NULL, status TEXT NOT NULL, started_at BIGINT NOT NULL,
        finished_at BIGINT, error TEXT)""",
    "CREATE UNIQUE INDEX IF NOT EXISTS {runs_key} ON {runs} (job, slot) WHERE manual = 0",
    """CREATE TABLE IF NOT EXISTS {jobs} (
        name TEXT PRIMARY KEY, kind TEXT NOT NULL, schedule TEXT NOT NULL)""",
)
# The whole claim: the first INSERT of (job, slot) wins, every later one changes nothing.
_CLAIM = """INSERT INTO {runs} (job, slot, manual, owner, status, started_at)
    VALUES ({p}, {p}, 0, {p}, 'running', {p})
    ON CONFLICT (job, slot) WHERE manual = 0 DO NOTHING RETURNING slot"""
_FINISH = """UPDATE {runs} SET status = {p}, error = {p}, finished_at = {p}
    WHERE job = {p} AND slot = {p} AND owner = {p} AND manual = {p} AND status = 'running'"""
_START_MANUAL = """INSERT INTO {runs} (job, slot, manual, owner, status, started_at)
    VALUES ({p}, {p}, 1, {p}, 'running', {p})"""
_REGISTER = """INSERT INTO {jobs} (name, kind, schedule) VALUES ({p}, {p}, {p})
    ON CONFLICT (name) DO UPDATE SET kind = excluded.kind, schedule = excluded.schedule"""
_HISTORY = """SELECT job, slot, owner, manual, status, started_at, finished_at, error
    FROM {runs} WHERE job = {p} ORDER BY started_at DESC, slot DESC LIMIT {p}"""
_KNOWN = "SELECT name, kind, schedule FROM {jobs} ORDER BY name"


def _quote(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'


class NaiveSqlBackend(ClaimBackend):
    """A unique-insert claim without lease (shared parts of SQLite and PostgreSQL)."""

    placeholder = "?"

    def __init__(self, table: str) -> None:
        schema, base = check_table_name(table)
        prefix = f"{_quote(schema)}." if schema else ""
        self.table = table
        self._names = {"runs": prefix + _quote(base), "jobs": prefix + _quote(base + "_jobs"),
                       "runs_key": _quote(base + "_key"), "p": self.placeholder}

    def _sql(self, template: str) -> str:
        return template.format(**self._names)

    @abstractmethod
    async def _execute(self, template: str, params: Sequence[Any] = ()) -> tuple[list[Row], int]:
        """Run one autocommit statement; returns ``(rows, rowcount)``."""

    @staticmethod
    def _now() -> int:
        return int(SYSTEM_CLOCK.time() * 1000)

    async def _create(self) -> None:
        for statement in _CREATE:
            await self._execute(statement)

    async def register(self, jobs: Sequence[JobSpec]) -> None:
        for job in jobs:
            await self._execute(_REGISTER, (job.name, stored_kind(job), job.schedule))

    async def claim(self, request: ClaimRequest) -> ClaimResult:
        now = self._now()
        if request.reason != "scheduled":  # no lease: nothing to take over or catch up
            return ClaimResult("taken", 0, now)
        rows, _ = await self._execute(_CLAIM, (request.name, request.slot, request.owner, now))
        return ClaimResult("won", 1, now) if rows else ClaimResult("taken", 0, now)

    async def finish(self, finish: Finish) -> bool:
        _, count = await self._execute(_FINISH, (
            finish.status, finish.error, self._now(), finish.name, finish.slot, finish.owner, 0))
        return count == 1

    async def start_manual(self, name: str, owner: str, started_ms: int) -> str:
        await self._execute(_START_MANUAL, (name, started_ms, owner, self._now()))
        return json.dumps([name, started_ms, owner])

    async def finish_manual(self, token: str, status: RunStatus, error: str | None,
                            history_size: int, history_ttl_ms: int | None) -> None:
        name, started_ms, owner = json.loads(token)
        await self._execute(_FINISH, (status, error, self._now(), name, started_ms, owner, 1))

    async def history(self, name: str, count: int) -> list[RunRecord]:
        rows, _ = await self._execute(_HISTORY, (name, count))
        return [_record(row) for row in rows]

    async def known_jobs(self) -> list[JobSpec]:
        rows, _ = await self._execute(_KNOWN)
        return [stored_spec(str(n), str(k), str(s)) for n, k, s in rows]


class NaiveSqliteBackend(NaiveSqlBackend):
    """The unique-insert claim in a SQLite file (one autocommit statement per claim)."""

    name = "sqlite:naive"

    def __init__(self, database: str, *, table: str = "anarchon_naive",
                 busy_timeout: float = 5.0) -> None:
        super().__init__(table)
        if not isinstance(database, str) or not database:
            raise ValueError(f"database must be a file path, got {database!r}")
        self.database = database
        self.busy_timeout = busy_timeout
        self._connection: sqlite3.Connection | None = None
        self._executor: ThreadPoolExecutor | None = None

    async def open(self) -> None:
        if self._connection is not None:
            return
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="anarchon-naive-sqlite")
        self._connection = await asyncio.get_running_loop().run_in_executor(
            self._executor, self._connect)
        await self._create()

    def _connect(self) -> sqlite3.Connection:
        connection = sqlite3.connect(self.database, isolation_level=None,
                                     check_same_thread=False, timeout=self.busy_timeout)
        use_wal(connection, self.busy_timeout)
        return connection

    async def close(self) -> None:
        connection, executor = self._connection, self._executor
        self._connection = self._executor = None
        if connection is not None and executor is not None:
            await asyncio.get_running_loop().run_in_executor(executor, connection.close)
            executor.shutdown(wait=False)

    async def _execute(self, template: str, params: Sequence[Any] = ()) -> tuple[list[Row], int]:
        if self._connection is None:
            await self.open()
        connection, statement = self._connection, self._sql(template)
        assert connection is not None

        def run() -> tuple[list[Row], int]:
            cursor = connection.execute(statement, tuple(params))
            return cursor.fetchall(), cursor.rowcount

        try:
            return await asyncio.get_running_loop().run_in_executor(self._executor, run)
        except sqlite3.Error as exc:
            raise StoreError(f"SQLite {self.database}: {exc}") from exc


class NaivePostgresBackend(NaiveSqlBackend):
    """The unique-insert claim in PostgreSQL (one autocommit statement per claim)."""

    name = "postgres:naive"
    placeholder = "%s"

    def __init__(self, dsn: str, *, table: str = "anarchon_naive") -> None:
        super().__init__(table)
        self.dsn = dsn
        self._connection: Any = None
        self._lock = asyncio.Lock()

    async def open(self) -> None:
        if self._connection is not None:
            return
        import psycopg

        try:
            self._connection = await psycopg.AsyncConnection.connect(self.dsn, autocommit=True)
        except psycopg.Error as exc:
            raise StoreError(f"PostgreSQL: cannot connect: {exc}") from exc
        await self._create()

    async def _create(self) -> None:
        # CREATE ... IF NOT EXISTS races between instances: serialise it per table
        import psycopg

        try:
            async with self._connection.transaction():
                await self._connection.execute("SELECT pg_advisory_xact_lock(hashtext(%s))",
                                               (self.table,))
                for statement in _CREATE:
                    await self._connection.execute(self._sql(statement))
        except psycopg.Error as exc:
            raise StoreError(f"PostgreSQL: cannot create {self.table}: {exc}") from exc

    async def close(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            await connection.close()

    async def _execute(self, template: str, params: Sequence[Any] = ()) -> tuple[list[Row], int]:
        import psycopg

        if self._connection is None:
            await self.open()
        try:
            async with self._lock:  # one connection: one statement at a time
                cursor = await self._connection.execute(self._sql(template), tuple(params))
                rows = await cursor.fetchall() if cursor.description else []
                return list(rows), int(cursor.rowcount)
        except psycopg.Error as exc:
            raise StoreError(f"PostgreSQL: {exc}") from exc


def _record(row: Row) -> RunRecord:
    job, slot, owner, manual, status, started, finished, error = row
    return RunRecord(
        name=job, slot=int(slot), scheduled_at=ms_to_datetime(int(slot)), instance_id=owner,
        manual=bool(manual), attempt=1, reason="manual" if manual else "scheduled",
        status=status, started_at=ms_to_datetime(int(started)),
        finished_at=ms_to_datetime(int(finished)) if finished is not None else None,
        duration=(int(finished) - int(started)) / 1000 if finished is not None else None,
        error=error,
    )


__all__ = ["NaivePostgresBackend", "NaiveSqlBackend", "NaiveSqliteBackend"]
