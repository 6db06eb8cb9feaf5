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
from collections.abc import AsyncIterator
from typing import Any

import psycopg
import psycopg_pool
from psycopg.conninfo import conninfo_to_dict

from ...engine.aio import cancel_and_wait
from .sessions import (
    AsyncSession,
    Params,
    Query,
    Row,
    Session,
    Statement,
    SyncSession,
    autocommit_async,
    autocommit_sync,
)

#: how long a call waits for a connection of our pool before the server is checked
#: (seconds): see ``AsyncPoolLink._busy()``
ACQUIRE_TIMEOUT = 0.3
#: how long a claim waits for a connection of a pool that is only busy (seconds)
BUSY_WAIT = 10.0
#: how often a pool that gave no connection in time has its server probed (seconds)
PROBE_EVERY = 0.1
#: calls that may each use a direct connection of their own at a time, while the pool
#: has none to give within ``ACQUIRE_TIMEOUT`` and the server answers
SPARES = 4


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
                yield AsyncSession(self.conn)
            else:
                yield SyncSession(self.conn)


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
        #: direct connections a call may still open while the pool has none to give
        self._spares = SPARES
        self._down = False  # the last probe of the server failed

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
                    conn, spare = await self._get(pool)
                    if spare:  # no pool connection in time: a direct one, for this call
                        async with self._spare(conn):
                            yield AsyncSession(conn)
                        return
                    self._heartbeat_conn = conn
                async with autocommit_async(conn):
                    yield AsyncSession(conn)
            return
        conn, spare = await self._get(pool)
        if spare:
            async with self._spare(conn):
                yield AsyncSession(conn)
            return
        try:
            async with autocommit_async(conn):
                yield AsyncSession(conn)
        finally:
            if pool is self.pool:
                await pool.putconn(conn)
            else:  # replaced meanwhile (see _busy()): the old pool is closing
                with contextlib.suppress(Exception):
                    await pool.putconn(conn)

    async def _get(self, pool: psycopg_pool.AsyncConnectionPool[Any]
                   ) -> tuple[psycopg.AsyncConnection[Any], bool]:
        """A pool connection, or (True) a direct one for one call (see ``_busy()``)."""
        try:
            return await pool.getconn(ACQUIRE_TIMEOUT), False
        except psycopg_pool.PoolTimeout:
            busy = await self._busy(pool)
            if isinstance(busy, psycopg.AsyncConnection):
                return busy, True
            if not busy:
                raise  # the server is down, or the pool is being replaced
        return await pool.getconn(BUSY_WAIT), False

    @contextlib.asynccontextmanager
    async def _spare(self, conn: psycopg.AsyncConnection[Any]) -> AsyncIterator[None]:
        """Close ``conn`` (a direct connection of ``_busy()``) after its one call."""
        try:
            yield
        finally:
            self._spares += 1
            with contextlib.suppress(Exception):
                await conn.close()

    async def _busy(self, pool: psycopg_pool.AsyncConnectionPool[Any]
                    ) -> bool | psycopg.AsyncConnection[Any]:
        """Our pool gave no connection within ``ACQUIRE_TIMEOUT``. The server is probed
        with a direct connection: if it answers, that connection serves this one call
        (returned) — the pool's connections were dropped (``pg_terminate_backend``, a
        proxy's idle timeout, a restart) and are being replaced with psycopg_pool's
        backoff, or all are in use — unless ``SPARES`` such calls are running already
        (True: wait ``BUSY_WAIT`` for the pool, which is only busy). False when the server
        does not answer (at once, without a probe, while the pool is being replaced after
        a failed one) (a claim must fail at once: the engine decides it again when the
        server answers, instead of it being queued and applied late); the pool is then
        replaced as soon as the server answers a direct connection, since after a
        restart psycopg_pool reconnects with a backoff (1 s, 2 s, 4 s …) that would fail
        every call for seconds more."""
        if not self.owned:
            return True
        watching = self._watcher is not None and not self._watcher.done()
        if watching and self._down:
            return False  # known down: the watcher replaces the pool once it answers
        try:
            probe = await psycopg.AsyncConnection.connect(
                self.conninfo, autocommit=True, connect_timeout=1,
                **self._connect_kwargs())
        except psycopg.Error:
            probe = None
        self._down = probe is None
        if (probe is None or pool.get_stats().get("pool_size", 0) == 0) and not watching:
            self._watcher = asyncio.ensure_future(self._watch(pool))
        if probe is None:
            return False
        if self._spares <= 0:
            await probe.close()
            return True
        self._spares -= 1
        return probe

    def _connect_kwargs(self) -> dict[str, Any]:
        if "application_name" in conninfo_to_dict(self.conninfo):
            return {}
        return {"application_name": "anarchon"}

    async def _watch(self, stuck: psycopg_pool.AsyncConnectionPool[Any]) -> None:
        while self.pool is stuck:
            try:
                probe = await psycopg.AsyncConnection.connect(
                    self.conninfo, autocommit=True, connect_timeout=1)
            except psycopg.Error:
                await asyncio.sleep(PROBE_EVERY)  # still down
                continue
            await probe.close()
            self._down = False  # calls probe again (and may use a direct connection)
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
                async with autocommit_sync(conn):
                    yield SyncSession(conn)
            return
        shared = await asyncio.to_thread(pool.getconn)
        try:
            async with autocommit_sync(shared):
                yield SyncSession(shared)
        finally:
            await asyncio.to_thread(pool.putconn, shared)


def _pool_conninfo(pool: psycopg_pool.AsyncConnectionPool[Any] | psycopg_pool.ConnectionPool[Any],
                   ) -> str:
    # a pool's conninfo may be a callable (rotating credentials): describe it vaguely
    return pool.conninfo if isinstance(pool.conninfo, str) else ""


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


__all__ = ["Link", "Params", "Query", "Row", "Session", "Statement", "make_link"]
