"""SqliteBackend: one ``BEGIN IMMEDIATE`` transaction per claim (or batch), on one machine.

SQLite has no server: the store clock is the clock of the machine holding the file
(shared by every instance on it). WAL and file locks do not work over network
filesystems: use it on one host (or a volume with working locks) only.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any, TypeVar

from ...clock import SYSTEM_CLOCK, Clock
from ...durations import DurationLike, parse_duration
from ...errors import IncompatibleStoreError, StoreError
from ...history import RunRecord, RunStatus
from ...jobs.name_checks import check_table_name
from ..base import (
    ClaimRequest,
    ClaimResult,
    Finish,
    HeartbeatResult,
    HeldRun,
    JobSpec,
    LeaseBackend,
    RunKey,
    RunState,
)
from ..batches import check_claims, check_finishes, check_skips, claim_bound, lone
from ..capabilities import BatchStore, SkipStore
from ..decoding import history_row, readable
from ..frameworks import stored_kind, stored_spec
from ..skips import Skip
from .control import SqliteControl
from .formats import SqliteFormat
from .liveness import SqliteLiveness
from .schema import Tables, is_libsql, parse_url, prepare, purge
from .skips import record_skips
from .transactions import claim, end_attempt, finish_run, first, prune
from .triggers import SqliteTriggers
from .values import SqliteValues
from .wal import use_wal

T = TypeVar("T")
MIN_SQLITE = (3, 35, 0)  # RETURNING and partial-index upserts


class SqliteBackend(SqliteTriggers, SqliteControl, SqliteValues, SqliteLiveness, SqliteFormat,
                    SkipStore, BatchStore, LeaseBackend):
    """Leases in a SQLite file shared by the processes of one machine.

    ``database``: a path (or ``":memory:"`` for one process), or an open
    ``sqlite3.Connection`` created with ``isolation_level=None`` and
    ``check_same_thread=False`` (anarchon issues ``BEGIN IMMEDIATE`` itself and never
    closes a connection it did not open). ``table`` names the run table; ``busy_timeout``
    bounds waiting for another writer. ``clock`` is the store clock (a test hook).
    """

    name = "sqlite"

    def __init__(
        self,
        database: str | sqlite3.Connection = "./anarchon.db",
        *,
        table: str = "anarchon_runs",
        busy_timeout: DurationLike = "5s",
        clock: Clock | None = None,
        create_tables: bool = True,
    ) -> None:
        _, table_name = check_table_name(table)
        if table != table_name:
            raise ValueError(f"invalid table {table!r}: SQLite tables take no schema prefix")
        if isinstance(database, sqlite3.Connection) or is_libsql(database):
            if getattr(database, "isolation_level", None) is not None:
                raise ValueError(
                    f"the {type(database).__module__} connection given to SqliteBackend "
                    "must be opened with isolation_level=None (anarchon writes BEGIN "
                    "IMMEDIATE itself)"
                )
            self._user_connection: Any = database
            self.database = "<connection>"
        elif isinstance(database, str):
            if not database:
                raise ValueError("database must be a file path or ':memory:'")
            self._user_connection = None
            self.database = database
        else:
            raise TypeError(f"database must be a path or sqlite3.Connection, "
                            f"got {type(database).__name__}")
        if not isinstance(create_tables, bool):
            raise TypeError(f"create_tables must be a bool, got {create_tables!r}")
        self.table = table
        self.create_tables = create_tables
        self._values_ready = not create_tables  # the values table is checked at open()
        self.busy_timeout = parse_duration(busy_timeout, option="busy_timeout")
        self._tables = Tables(table)
        self._clock = clock or SYSTEM_CLOCK
        self._connection: sqlite3.Connection | None = None
        self._executor: ThreadPoolExecutor | None = None
        self._open_lock = asyncio.Lock()

    def lease_clone(self) -> SqliteBackend | None:
        """A backend on the same file with a connection of its own; ``None`` for
        ``:memory:`` (another connection would be another database) or the application's
        own connection."""
        if self._user_connection is not None or self.database == ":memory:" or (
                self.database.startswith("file:") and "memory" in self.database):
            return None
        return SqliteBackend(self.database, table=self.table, busy_timeout=self.busy_timeout,
                             clock=self._clock, create_tables=self.create_tables)

    def __repr__(self) -> str:
        return f"<SqliteBackend {self.database} table={self.table!r}>"

    @classmethod
    def from_url(cls, url: str, **options: Any) -> SqliteBackend:
        """``sqlite:///relative.db``, ``sqlite:////abs/path.db``, ``sqlite:///:memory:``;
        query parameters ``table``, ``busy_timeout`` and ``create`` (``0``/``1``:
        ``create_tables``). ``sqlite:/x.db`` (one slash) is refused: it reads as
        absolute but the three-slash form makes it relative."""
        path, query = parse_url(url, options)
        return cls(path or "./anarchon.db", **query)

    # -- plumbing -------------------------------------------------------------------

    async def _call(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        if self._connection is None:
            await self.open()
        assert self._executor is not None and self._connection is not None
        connection = self._connection
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self._executor, fn, connection)
        except sqlite3.OperationalError as exc:
            raise StoreError(f"SQLite {self.database}: {exc}") from exc
        except ValueError as exc:  # libSQL reports database errors as ValueError
            if is_libsql(connection):
                raise StoreError(f"libSQL {self.database}: {exc}") from exc
            raise

    @contextmanager
    def _write(self, connection: sqlite3.Connection) -> Iterator[sqlite3.Cursor]:
        cursor = connection.cursor()
        cursor.execute("BEGIN IMMEDIATE")
        try:
            yield cursor
        except BaseException:
            cursor.execute("ROLLBACK")
            raise
        cursor.execute("COMMIT")

    def _now(self) -> int:
        return int(self._clock.time() * 1000)

    async def open(self) -> None:
        async with self._open_lock:
            if self._connection is not None:
                return
            if sqlite3.sqlite_version_info < MIN_SQLITE:
                raise IncompatibleStoreError(
                    f"SQLite {sqlite3.sqlite_version} is too old: anarchon needs 3.35+ "
                    "(install a newer Python or libsqlite3)"
                )
            executor = ThreadPoolExecutor(1, thread_name_prefix=f"anarchon-sqlite-{self.table}")
            loop = asyncio.get_running_loop()
            try:
                connection = await loop.run_in_executor(executor, self._connect)
                await loop.run_in_executor(executor, self._prepare, connection)
            except sqlite3.Error as exc:
                executor.shutdown(wait=False)
                raise StoreError(f"cannot open SQLite database {self.database}: {exc}") from exc
            except BaseException:
                executor.shutdown(wait=False)
                raise
            self._executor, self._connection = executor, connection

    def _connect(self) -> sqlite3.Connection:
        if self._user_connection is not None:
            user: sqlite3.Connection = self._user_connection
            return user
        connection = sqlite3.connect(
            self.database, isolation_level=None, check_same_thread=False,
            timeout=self.busy_timeout,
        )
        use_wal(connection, self.busy_timeout)
        connection.execute("PRAGMA synchronous=NORMAL")
        return connection

    def _prepare(self, connection: sqlite3.Connection) -> None:
        connection.execute(f"PRAGMA busy_timeout={int(self.busy_timeout * 1000)}")
        with self._write(connection) as cur:
            prepare(cur, self._tables, self.database, self.create_tables)

    def schema_sql(self) -> str:
        """The SQL that creates this backend's tables (``anarchon schema`` prints it)."""
        return self._tables.ddl()

    async def close(self) -> None:
        executor, connection = self._executor, self._connection
        self._executor = self._connection = None
        if executor is None:
            return
        if connection is not None and self._user_connection is None:
            await asyncio.get_running_loop().run_in_executor(executor, connection.close)
        executor.shutdown(wait=False)

    # -- registration and claims -------------------------------------------------------

    async def register(self, jobs: Sequence[JobSpec]) -> None:
        def run(connection: sqlite3.Connection) -> None:
            now = self._now()
            with self._write(connection) as cur:
                cur.executemany(
                    f"""INSERT INTO {self._tables.jobs} (name, kind, schedule, first_seen, updated)
                        VALUES (?, ?, ?, ?, ?)
                        ON CONFLICT (name) DO UPDATE SET kind = excluded.kind,
                            schedule = excluded.schedule, updated = excluded.updated""",
                    [(job.name, stored_kind(job), job.schedule, now, now) for job in jobs],
                )

        if jobs:
            await self._call(run)

    async def claim(self, request: ClaimRequest) -> ClaimResult:
        """One ``BEGIN IMMEDIATE`` transaction. See ClaimRequest for the rules."""
        return await lone(self.claim_many, request)

    async def claim_many(self, requests: Sequence[ClaimRequest]
                         ) -> list[ClaimResult | Exception]:
        """One ``BEGIN IMMEDIATE`` transaction for all the requests, each judged as a
        lone claim is, in order, at one store time; all are checked before any write."""
        check_claims(requests)
        bound = claim_bound(requests)
        return await self._each_in_one_transaction(requests, claim, bound)

    def _each_in_one_transaction(self, items: Sequence[Any], each: Callable[..., T],
                                 bound: float | None = None) -> Awaitable[list[T]]:
        """``each(cursor, tables, item, now)`` for every item, in one transaction; with
        ``bound``, nothing is written if the write lock came more than ``bound`` seconds
        after the call (a claim is never applied late: see ``claim_bound()``)."""
        sent = time.monotonic()

        def run(connection: sqlite3.Connection) -> list[T]:
            with self._write(connection) as cur:
                if bound is not None and (waited := time.monotonic() - sent) > bound:
                    raise sqlite3.OperationalError(
                        f"claim not applied: the write lock came {waited:.2f}s after the "
                        f"call (bound {bound:g}s); decided again from the store's state")
                now = self._now()
                return [each(cur, self._tables, item, now) for item in items]

        return self._call(run) if items else asyncio.sleep(0, [])

    async def confirm(self, request: ClaimRequest) -> int:
        def run(connection: sqlite3.Connection) -> int:
            row = first(connection.execute(
                f"SELECT owner, attempt, state FROM {self._tables.runs} "
                "WHERE job = ? AND slot = ?",
                (request.name, request.slot),
            ))
            if row and row[0] == request.owner and row[2] == "running":
                return int(row[1])
            return 0

        return await self._call(run)

    # -- leases -------------------------------------------------------------------------

    async def heartbeat(self, owner: str, held: Sequence[HeldRun],
                        watched: Sequence[RunKey], lease_ms: int) -> HeartbeatResult:
        def run(connection: sqlite3.Connection) -> HeartbeatResult:
            with self._write(connection) as cur:
                return self._renew(cur, owner, held, watched, lease_ms, self._now())

        return await self._call(run)

    def _renew(self, cur: sqlite3.Cursor, owner: str, held: Sequence[HeldRun],
               watched: Sequence[RunKey], lease_ms: int, now: int) -> HeartbeatResult:
        t = self._tables
        lost, gone = set(), set()
        for run_ in held:
            renewed = first(cur.execute(
                f"""UPDATE {t.runs} SET lease_until = ?
                    WHERE job = ? AND slot = ? AND owner = ? AND attempt = ?
                      AND state = 'running' RETURNING 1""",
                (now + lease_ms, run_.name, run_.slot, owner, run_.attempt),
            ))
            if renewed is None:
                lost.add(run_.key)
                if self._read_state(cur, run_.name, run_.slot, now) is None:
                    gone.add(run_.key)  # no record at all: the store forgot it
        states = [
            state for key in watched
            if (state := self._read_state(cur, key.name, key.slot, now)) is not None
        ]
        return HeartbeatResult(frozenset(lost), states, frozenset(gone))

    def _read_state(self, cur: sqlite3.Cursor, name: str, slot: int, now: int) -> RunState | None:
        row = first(cur.execute(
            f"""SELECT owner, attempt, state, lease_until, handed_over FROM {self._tables.runs}
                WHERE job = ? AND slot = ?""",
            (name, slot),
        ))
        if row is None:
            return None
        owner, attempt, state, lease_until, handed_over = row
        return RunState(name, slot, owner, attempt, state == "running", lease_until <= now,
                        bool(handed_over))

    async def release(self, owner: str, run: HeldRun) -> bool:
        def do(connection: sqlite3.Connection) -> bool:
            with self._write(connection) as cur:
                now = self._now()
                released = first(cur.execute(
                    f"""UPDATE {self._tables.runs} SET lease_until = ?, handed_over = 1
                        WHERE job = ? AND slot = ? AND owner = ? AND attempt = ?
                          AND state = 'running' RETURNING 1""",
                    (now, run.name, run.slot, owner, run.attempt),
                ))
                if released is None:
                    return False
                end_attempt(cur, self._tables, run.name, run.slot, run.attempt, "interrupted",
                            None, now)
                return True

        return await self._call(do)

    async def note(self, owner: str, run: HeldRun, text: str) -> bool:
        """Store ``text`` as the running attempt's ``error``, fenced by ``(owner, attempt)``."""
        def do(connection: sqlite3.Connection) -> bool:
            t = self._tables
            with self._write(connection) as cur:
                noted = first(cur.execute(
                    f"""UPDATE {t.attempts} SET error = ?
                        WHERE job = ? AND slot = ? AND attempt = ? AND manual = 0
                          AND status = 'running'
                          AND EXISTS (SELECT 1 FROM {t.runs} r
                                      WHERE r.job = ? AND r.slot = ? AND r.owner = ?
                                        AND r.attempt = ? AND r.state = 'running'
                                        AND r.handed_over = 0)
                        RETURNING 1""",
                    (text, run.name, run.slot, run.attempt,
                     run.name, run.slot, owner, run.attempt),
                ))
                return noted is not None

        return await self._call(do)

    async def unfinished(self, names: Sequence[str]) -> list[RunState]:
        def run(connection: sqlite3.Connection) -> list[RunState]:
            now = self._now()
            wanted = set(names)
            rows = connection.execute(
                f"""SELECT job, slot, owner, attempt, lease_until, handed_over
                    FROM {self._tables.runs} WHERE state = 'running'"""
            ).fetchall()
            return [
                RunState(job, slot, owner, attempt, True, lease_until <= now, bool(handed))
                for job, slot, owner, attempt, lease_until, handed in rows
                if job in wanted
            ]

        return await self._call(run)

    # -- outcomes and history --------------------------------------------------------------

    async def finish(self, finish: Finish) -> bool:
        """Record the outcome (fenced by owner and attempt) and bound history."""
        return await lone(self.finish_many, finish)

    async def finish_many(self, finishes: Sequence[Finish]) -> list[bool | Exception]:
        """Every outcome in one ``BEGIN IMMEDIATE`` transaction, each recorded as
        ``finish()`` would; all are checked before any write."""
        check_finishes(finishes)
        return list(await self._each_in_one_transaction(finishes, finish_run))

    async def record_skips(self, skips: Sequence[Skip]) -> None:
        """Every skip record in one ``BEGIN IMMEDIATE`` transaction (all checked first)."""
        checked = check_skips(skips)
        await self._each_in_one_transaction([checked] if checked else [], record_skips)

    async def start_manual(self, name: str, owner: str, started_ms: int) -> str:
        def run(connection: sqlite3.Connection) -> str:
            with self._write(connection) as cur:
                now = self._now()
                cur.execute(
                    f"""INSERT INTO {self._tables.attempts}
                        (job, slot, attempt, instance, manual, reason, status, started_at)
                        VALUES (?, ?, 1, ?, 1, 'manual', 'running', ?)""",
                    (name, started_ms, owner, now),
                )
                return str(cur.lastrowid)

        return await self._call(run)

    async def finish_manual(self, token: str, status: RunStatus, error: str | None,
                            history_size: int, history_ttl_ms: int | None) -> None:
        def run(connection: sqlite3.Connection) -> None:
            with self._write(connection) as cur:
                now = self._now()
                row = first(cur.execute(
                    f"""UPDATE {self._tables.attempts} SET status = ?, error = ?, finished_at = ?
                        WHERE id = ? RETURNING job""",
                    (status, error, now, int(token)),
                ))
                if row is not None:
                    prune(cur, self._tables, row[0], history_size, history_ttl_ms, now)

        await self._call(run)

    async def history(self, name: str, count: int) -> list[RunRecord]:
        def run(connection: sqlite3.Connection) -> list[RunRecord]:
            rows = connection.execute(
                f"""SELECT job, slot, instance, manual, attempt, reason, status,
                           started_at, finished_at, error
                    FROM {self._tables.attempts} WHERE job = ?
                    ORDER BY started_at DESC, id DESC LIMIT ?""",
                (name, count),
            ).fetchall()
            return readable(rows, history_row, f"{self!r} {self._tables.attempts}", repr)

        return await self._call(run)

    async def known_jobs(self) -> list[JobSpec]:
        def run(connection: sqlite3.Connection) -> list[JobSpec]:
            rows = connection.execute(
                f"SELECT name, kind, schedule, updated FROM {self._tables.jobs} ORDER BY name"
            ).fetchall()
            return readable(rows, lambda row: stored_spec(*row),
                            f"{self!r} {self._tables.jobs}", repr)

        return await self._call(run)

    async def purge(self) -> int:
        """Empty this table namespace (the tables and their format version stay)."""
        tables = self._tables

        def run(connection: sqlite3.Connection) -> int:
            with self._write(connection) as cur:
                return purge(cur, tables)

        return await self._call(run)
