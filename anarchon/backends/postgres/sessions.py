"""Sessions: one connection borrowed for a few statements (async, or sync driven from a
worker thread), for ``links.py``."""

from __future__ import annotations

import asyncio
import contextlib
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

import psycopg
from psycopg import sql

Query = sql.Composed | sql.SQL
Params = Mapping[str, Any]
Row = tuple[Any, ...]
Statement = tuple[Query, Params]


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


class AsyncSession(Session):
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


class SyncSession(Session):
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
        with conn.pipeline():  # one implicit transaction: see AsyncSession.serialised
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


@contextlib.asynccontextmanager
async def autocommit_async(conn: psycopg.AsyncConnection[Any]) -> AsyncIterator[None]:
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
async def autocommit_sync(conn: psycopg.Connection[Any]) -> AsyncIterator[None]:
    if conn.autocommit:
        yield
        return
    await asyncio.to_thread(conn.set_autocommit, True)
    try:
        yield
    finally:
        if not conn.closed and not conn.broken:
            await asyncio.to_thread(conn.set_autocommit, False)


__all__ = ["AsyncSession", "Params", "Query", "Row", "Session", "Statement", "SyncSession",
           "autocommit_async", "autocommit_sync"]
