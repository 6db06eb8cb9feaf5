"""How the backend reaches PostgreSQL: its own pool, or the user's connection or pool.

A ``Link`` hands out ``Session`` objects, each bound to one connection for the
length of an ``async with``. Sync psycopg objects are driven from a worker thread, so the
backend code above is the same for all four kinds of ``connection=``.

What we require of a connection the user passes in: ``autocommit=True`` (checked at
``open()``; we never commit or roll back the user's transactions) and that nothing else
uses it while a backend call is in flight. Pool connections that are not in autocommit
mode are switched to autocommit while we hold them and switched back before they return.
"""

from __future__ import annotations

import asyncio
import contextlib
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

import psycopg
import psycopg_pool
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict

from ...aio import cancel_and_wait

Query = sql.Composed | sql.SQL
Params = Mapping[str, Any]
Row = tuple[Any, ...]
Statement = tuple[Query, Params]

#: how long a call waits for a connection of our pool before the server is checked
#: (seconds): see ``AsyncPoolLink._busy()``
ACQUIRE_TIMEOUT = 0.3
#: how long a claim waits for a connection of a pool that is only busy (seconds)
BUSY_WAIT = 10.0
#: how often a pool that gave no connection in time has its server probed (seconds)
PROBE_EVERY = 0.1


def describe_conninfo(conninfo: str) -> str:
    """``host:port/dbname`` for messages: never the password."""
    try:
        info = conninfo_to_dict(conninfo)
    except psycopg.Error:
        return "<unparsable conninfo>"
    host = info.get("host") or info.get("hostaddr") or "localhost"
    port = info.get("port") or "5432"
    return f"{host}:{port}/{info.get('dbname') or info.get('user') or ''}"


def describe_connection(conn: psycopg.Connection[Any] | psycopg.AsyncConnection[Any]) -> str:
    """``host:port/dbname`` of an open connection."""
    try:
        return f"{conn.info.host}:{conn.info.port}/{conn.info.dbname}"
    except psycopg.Error:
        return "<closed connection>"


class Session(ABC):
    """One connection, borrowed for a few statements."""

    @abstractmethod
    async def fetch(self, query: Query, params: Params | None = None) -> list[Row]:
        """Run one statement (autocommit) and return its rows (empty if none)."""

    @abstractmethod
    async def serialised(self, statements: Sequence[Statement]) -> list[list[Row]]:
        """The statements (typically a lock, then the work) as one transaction in one
        round trip (a pipeline); the rows of each, in order."""

    @abstractmethod
    def transaction(self) -> contextlib.AbstractAsyncContextManager[None]:
        """An explicit transaction around several ``fetch()`` calls."""


class _AsyncSession(Session):
    def __init__(self, conn: psycopg.AsyncConnection[Any]) -> None:
        self.conn = conn

    async def fetch(self, query: Query, params: Params | None = None) -> list[Row]:
        cur = await self.conn.execute(query, params)
        return list(await cur.fetchall()) if cur.description is not None else []

    async def serialised(self, statements: Sequence[Statement]) -> list[list[Row]]:
        conn = self.conn
        if not psycopg.Pipeline.is_supported():  # libpq < 14: same, in n + 2 round trips
            async with conn.transaction():
                cursors = [await conn.execute(q, p) for q, p in statements]
                return [list(await cur.fetchall()) for cur in cursors]
        # No BEGIN/COMMIT: everything up to the pipeline's one Sync is a single implicit
        # transaction (an error rolls it all back), and READ COMMITTED gives each
        # statement a snapshot taken after the previous one (the lock) was done.
        async with conn.pipeline():
            cursors = [await conn.execute(q, p) for q, p in statements]
        return [list(await cur.fetchall()) for cur in cursors]

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[None]:
        async with self.conn.transaction():
            yield


class _SyncSession(Session):
    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.conn = conn

    def _fetch(self, query: Query, params: Params | None) -> list[Row]:
        cur = self.conn.execute(query, params)
        return list(cur.fetchall()) if cur.description is not None else []

    async def fetch(self, query: Query, params: Params | None = None) -> list[Row]:
        return await asyncio.to_thread(self._fetch, query, params)

    def _serialised(self, statements: Sequence[Statement]) -> list[list[Row]]:
        conn = self.conn
        if not psycopg.Pipeline.is_supported():
            with conn.transaction():
                cursors = [conn.execute(q, p) for q, p in statements]
                return [list(cur.fetchall()) for cur in cursors]
        with conn.pipeline():  # one implicit transaction: see _AsyncSession.serialised
            cursors = [conn.execute(q, p) for q, p in statements]
        return [list(cur.fetchall()) for cur in cursors]

    async def serialised(self, statements: Sequence[Statement]) -> list[list[Row]]:
        return await asyncio.to_thread(self._serialised, statements)

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[None]:
        tx = self.conn.transaction()
        await asyncio.to_thread(tx.__enter__)
        try:
            yield
        except BaseException as exc:
            await asyncio.to_thread(tx.__exit__, type(exc), exc, exc.__traceback__)
            raise
        else:
            await asyncio.to_thread(tx.__exit__, None, None, None)


class Link(ABC):
    """A way to reach the database: our own pool, or the user's object."""

    #: ``host:port/dbname`` for error messages
    address: str

    @abstractmethod
    async def open(self, connect_timeout: float) -> None:
        """Connect (our own objects) or check the user's object."""

    @abstractmethod
    async def close(self) -> None:
        """Close what we opened; never the user's object."""

    @abstractmethod
    def session(self, heartbeat: bool = False) -> contextlib.AbstractAsyncContextManager[Session]:
        """Borrow a connection. ``heartbeat=True`` uses the connection reserved for
        heartbeats, so handlers that exhaust a shared pool cannot starve them."""


def _check_autocommit(conn: psycopg.Connection[Any] | psycopg.AsyncConnection[Any]) -> None:
    if not conn.autocommit:
        raise ValueError(
            "PostgresBackend needs a connection in autocommit mode: connect with "
            "autocommit=True (or pass a pool); anarchon never commits your transactions")
    if conn.closed:
        raise ValueError("PostgresBackend was given a closed connection")


class ConnectionLink(Link):
    """A user's connection: every call shares it, one at a time (a sync ``Connection`` is
    driven from a worker thread)."""

    def __init__(self, conn: psycopg.AsyncConnection[Any] | psycopg.Connection[Any]) -> None:
        self.conn = conn
        self.address = describe_connection(conn)
        self._lock = asyncio.Lock()

    async def open(self, connect_timeout: float) -> None:
        _check_autocommit(self.conn)

    async def close(self) -> None:
        pass  # the user's connection: never closed

    @contextlib.asynccontextmanager
    async def session(self, heartbeat: bool = False) -> AsyncIterator[Session]:
        async with self._lock:
            if isinstance(self.conn, psycopg.AsyncConnection):
                yield _AsyncSession(self.conn)
            else:
                yield _SyncSession(self.conn)


class AsyncPoolLink(Link):
    """An ``AsyncConnectionPool``: ours (built from a conninfo) or the user's.

    One pool connection is reserved for heartbeats while the pool has at least two.
    """

    def __init__(self, pool: psycopg_pool.AsyncConnectionPool[Any] | None = None, *,
                 conninfo: str = "", pool_size: int = 4) -> None:
        self.pool = pool
        self.owned = pool is None
        self.conninfo = conninfo
        self.pool_size = pool_size
        self.address = describe_conninfo(conninfo if pool is None else _pool_conninfo(pool))
        self._heartbeat_conn: psycopg.AsyncConnection[Any] | None = None
        self._heartbeat_lock = asyncio.Lock()
        self._connect_timeout = 5.0
        self._watcher: asyncio.Task[None] | None = None

    async def open(self, connect_timeout: float) -> None:
        if self.pool is not None:
            return
        self._connect_timeout = connect_timeout
        # A direct connection first: its error names the real cause (refused, bad
        # password, unknown database), where a pool would only time out.
        probe = await psycopg.AsyncConnection.connect(
            self.conninfo, autocommit=True, connect_timeout=max(1, round(connect_timeout)))
        await probe.close()
        self.pool = await self._new_pool(connect_timeout)

    async def _new_pool(self, connect_timeout: float
                        ) -> psycopg_pool.AsyncConnectionPool[Any]:
        kwargs: dict[str, Any] = {"autocommit": True}
        if "application_name" not in conninfo_to_dict(self.conninfo):
            kwargs["application_name"] = "anarchon"
        pool = psycopg_pool.AsyncConnectionPool(
            self.conninfo, min_size=1, max_size=self.pool_size + 1, open=False,
            kwargs=kwargs,
            check=psycopg_pool.AsyncConnectionPool.check_connection,
            name=f"anarchon:{self.address}")
        await pool.open(wait=True, timeout=connect_timeout)
        return pool

    async def close(self) -> None:
        watcher, self._watcher = self._watcher, None
        if watcher is not None:
            await cancel_and_wait([watcher])
        pool, self.pool = self.pool, (None if self.owned else self.pool)
        conn, self._heartbeat_conn = self._heartbeat_conn, None
        if pool is None:
            return
        if conn is not None:
            with contextlib.suppress(Exception):
                await pool.putconn(conn)
        if self.owned:
            await pool.close()

    def _pool(self) -> psycopg_pool.AsyncConnectionPool[Any]:
        if self.pool is None:
            raise RuntimeError("PostgresBackend is not open")
        return self.pool

    @contextlib.asynccontextmanager
    async def session(self, heartbeat: bool = False) -> AsyncIterator[Session]:
        pool = self._pool()
        if heartbeat and pool.max_size > 1:
            async with self._heartbeat_lock:
                conn = self._heartbeat_conn
                if conn is None or conn.closed or conn.broken:
                    if conn is not None:
                        self._heartbeat_conn = None
                        await pool.putconn(conn)
                    conn = self._heartbeat_conn = await self._get(pool)
                async with _autocommit_async(conn):
                    yield _AsyncSession(conn)
            return
        conn = await self._get(pool)
        try:
            async with _autocommit_async(conn):
                yield _AsyncSession(conn)
        finally:
            if pool is self.pool:
                await pool.putconn(conn)
            else:  # replaced meanwhile (see _busy()): the old pool is closing
                with contextlib.suppress(Exception):
                    await pool.putconn(conn)

    async def _get(self, pool: psycopg_pool.AsyncConnectionPool[Any]
                   ) -> psycopg.AsyncConnection[Any]:
        conn: psycopg.AsyncConnection[Any]
        try:
            conn = await pool.getconn(ACQUIRE_TIMEOUT)
        except psycopg_pool.PoolTimeout:
            if not await self._busy(pool):
                raise  # the server is down, or the pool is being replaced
            conn = await pool.getconn(BUSY_WAIT)
        return conn

    async def _busy(self, pool: psycopg_pool.AsyncConnectionPool[Any]) -> bool:
        """Our pool gave no connection within ``ACQUIRE_TIMEOUT``: True if it is only
        busy (the server answers and the pool holds connections: wait longer), else
        False, and the pool is replaced as soon as the server answers a direct
        connection. While the server is down a claim must fail at once (the engine
        decides it again when the server answers) instead of queueing and being applied
        late; after a restart psycopg_pool reconnects with a backoff (1 s, 2 s, 4 s …)
        that would fail every call for seconds more."""
        if not self.owned:
            return True
        if self._watcher is None or self._watcher.done():
            try:
                probe = await psycopg.AsyncConnection.connect(
                    self.conninfo, autocommit=True, connect_timeout=1)
            except psycopg.Error:
                probe = None
            if probe is not None:
                await probe.close()
                if pool.get_stats().get("pool_size", 0) > 0:
                    return True
            self._watcher = asyncio.ensure_future(self._watch(pool))
        return False

    async def _watch(self, stuck: psycopg_pool.AsyncConnectionPool[Any]) -> None:
        while self.pool is stuck:
            try:
                probe = await psycopg.AsyncConnection.connect(
                    self.conninfo, autocommit=True, connect_timeout=1)
            except psycopg.Error:
                await asyncio.sleep(PROBE_EVERY)  # still down
                continue
            await probe.close()
            try:
                fresh = await self._new_pool(self._connect_timeout)
            except (psycopg.Error, psycopg_pool.PoolTimeout):
                await asyncio.sleep(PROBE_EVERY)
                continue
            if self.pool is not stuck:  # closed or replaced meanwhile
                await fresh.close()
                return
            self.pool, self._heartbeat_conn = fresh, None
            await stuck.close(timeout=0)


class SyncPoolLink(Link):
    """A user's sync ``ConnectionPool``, driven from a worker thread."""

    def __init__(self, pool: psycopg_pool.ConnectionPool[Any]) -> None:
        self.pool = pool
        self.address = describe_conninfo(_pool_conninfo(pool))
        self._heartbeat_conn: psycopg.Connection[Any] | None = None
        self._heartbeat_lock = asyncio.Lock()

    async def open(self, connect_timeout: float) -> None:
        pass  # the user's pool: opened by its owner

    async def close(self) -> None:
        conn, self._heartbeat_conn = self._heartbeat_conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                await asyncio.to_thread(self.pool.putconn, conn)

    @contextlib.asynccontextmanager
    async def session(self, heartbeat: bool = False) -> AsyncIterator[Session]:
        pool = self.pool
        if heartbeat and pool.max_size > 1:
            async with self._heartbeat_lock:
                conn = self._heartbeat_conn
                if conn is None or conn.closed or conn.broken:
                    if conn is not None:
                        self._heartbeat_conn = None
                        await asyncio.to_thread(pool.putconn, conn)
                    fresh: psycopg.Connection[Any] = await asyncio.to_thread(pool.getconn)
                    conn = self._heartbeat_conn = fresh
                async with _autocommit_sync(conn):
                    yield _SyncSession(conn)
            return
        shared = await asyncio.to_thread(pool.getconn)
        try:
            async with _autocommit_sync(shared):
                yield _SyncSession(shared)
        finally:
            await asyncio.to_thread(pool.putconn, shared)


def _pool_conninfo(pool: psycopg_pool.AsyncConnectionPool[Any] | psycopg_pool.ConnectionPool[Any],
                   ) -> str:
    # a pool's conninfo may be a callable (rotating credentials): describe it vaguely
    return pool.conninfo if isinstance(pool.conninfo, str) else ""


@contextlib.asynccontextmanager
async def _autocommit_async(conn: psycopg.AsyncConnection[Any]) -> AsyncIterator[None]:
    if conn.autocommit:
        yield
        return
    await conn.set_autocommit(True)
    try:
        yield
    finally:
        if not conn.closed and not conn.broken:
            await conn.set_autocommit(False)


@contextlib.asynccontextmanager
async def _autocommit_sync(conn: psycopg.Connection[Any]) -> AsyncIterator[None]:
    if conn.autocommit:
        yield
        return
    await asyncio.to_thread(conn.set_autocommit, True)
    try:
        yield
    finally:
        if not conn.closed and not conn.broken:
            await asyncio.to_thread(conn.set_autocommit, False)


def make_link(connection: object, pool_size: int) -> Link:
    """The ``Link`` for whatever was passed as ``connection=``."""
    if isinstance(connection, str):
        return AsyncPoolLink(conninfo=connection, pool_size=pool_size)
    if isinstance(connection, (psycopg.AsyncConnection, psycopg.Connection)):
        return ConnectionLink(connection)
    if isinstance(connection, psycopg_pool.AsyncConnectionPool):
        return AsyncPoolLink(connection)
    if isinstance(connection, psycopg_pool.ConnectionPool):
        return SyncPoolLink(connection)
    raise TypeError(
        "PostgresBackend connection must be a DSN/URL str, a psycopg Connection or "
        "AsyncConnection, or a psycopg_pool ConnectionPool or AsyncConnectionPool; got "
        f"{type(connection).__name__}")


__all__ = ["Link", "Params", "Query", "Row", "Session", "make_link"]
