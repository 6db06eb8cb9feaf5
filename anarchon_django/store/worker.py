"""How the async backend reaches the synchronous ORM: one thread of its own.

Django connections belong to threads (``connections[alias]`` is thread-local), and the
ORM refuses to run inside an event loop. The backend therefore runs every store
operation in **one dedicated thread** (a one-worker executor) rather than through
``sync_to_async``:

* ``thread_sensitive=True`` would queue the scheduler's heartbeats behind whatever else
  the main thread does (under ASGI, every request's ORM work), so a slow page could cost
  a lease; ``thread_sensitive=False`` picks a pool thread per call, so connections would
  be opened in arbitrary threads and never closed.
* One thread means one connection per backend, opened on first use and reused (no
  reconnect per heartbeat), and a place to close it: ``OrmThread.close()`` closes that
  thread's connections *in* that thread before the thread ends, so a test database can be
  dropped afterwards ("being accessed by other users" never happens because of us).
* A connection that failed (server restart, "MySQL server has gone away") is closed after
  the error and reopened by the next call, as Django does between requests.

Database errors leave as [`StoreError`][anarchon.errors.StoreError].
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from django.db import DatabaseError, InterfaceError, connections

from anarchon.errors import StoreError

T = TypeVar("T")

#: epoch milliseconds of the database server's clock (constant SQL, nothing spliced in)
CLOCK_SQL = {
    "postgresql": "SELECT CAST(FLOOR(EXTRACT(EPOCH FROM clock_timestamp()) * 1000) AS BIGINT)",
    # arithmetic on UTC values: independent of the session time zone and of DST
    "mysql": "SELECT TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000",
    "sqlite": "SELECT CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)",
}


def database_ms(alias: str) -> int:
    """The database's clock, epoch milliseconds (SQLite: the machine holding the file)."""
    connection = connections[alias]
    with connection.cursor() as cursor:
        cursor.execute(CLOCK_SQL[connection.vendor])
        row = cursor.fetchone()
    return int(row[0])


class OrmThread:
    """Runs ORM functions for one backend in one thread of its own (see module doc)."""

    def __init__(self, alias: str) -> None:
        self.alias = alias
        self._executor: ThreadPoolExecutor | None = None

    async def call(self, fn: Callable[[], T]) -> T:
        """``fn()`` in the backend's thread; database errors become ``StoreError``."""
        if self._executor is None:
            self._executor = ThreadPoolExecutor(
                1, thread_name_prefix=f"anarchon-django-{self.alias}")
        return await asyncio.get_running_loop().run_in_executor(self._executor, self._run, fn)

    def _run(self, fn: Callable[[], T]) -> T:
        try:
            return fn()
        except (DatabaseError, InterfaceError) as exc:
            connection = connections[self.alias]
            if not connection.in_atomic_block:
                connection.close()  # reopened by the next call
            raise StoreError(f"Django database {self.alias!r}: {exc}") from exc

    async def close(self) -> None:
        """Close this thread's connections (in the thread), then end the thread."""
        executor, self._executor = self._executor, None
        if executor is None:
            return
        try:
            await asyncio.get_running_loop().run_in_executor(executor, connections.close_all)
        finally:
            executor.shutdown(wait=True)
