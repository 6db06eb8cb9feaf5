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
  the error and reopened by the next call, as Django does between requests; a call whose
  PostgreSQL session was terminated (57P01) is sent again at once on a new one.
* A call whose transaction the database rolled back whole to break a deadlock (MySQL and
  MariaDB errno 1213, PostgreSQL SQLSTATE 40P01) or for a serialization failure (40001)
  changed nothing: it is sent again on the same connection after a short random pause
  (about 5, 10, 20 ms), at most ``CONFLICT_RETRIES`` times, so a store hiccup costs no
  slot. Both retries apply only when the call ran in no transaction of its caller's
  (``in_atomic_block``): there the rollback is the caller's to handle.

Database errors leave as [`StoreError`][anarchon.errors.StoreError].
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from django.db import DatabaseError, InterfaceError, connections

from anarchon.errors import StoreError

T = TypeVar("T")

logger = logging.getLogger("anarchon")

#: epoch milliseconds of the database server's clock (constant SQL, nothing spliced in)
CLOCK_SQL = {
    "postgresql": "SELECT CAST(FLOOR(EXTRACT(EPOCH FROM clock_timestamp()) * 1000) AS BIGINT)",
    # arithmetic on UTC values: independent of the session time zone and of DST
    "mysql": "SELECT TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000",
    "sqlite": "SELECT CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)",
}


#: how many times a call whose session the server terminated is sent again
TERMINATED_RETRIES = 2


#: how many times a call whose transaction was a deadlock's victim (or failed to
#: serialise) is sent again, and the pause before the first resend (seconds; it doubles
#: at each, times a random factor in [0.5, 1.5) so the parties of the deadlock part)
CONFLICT_RETRIES = 3
CONFLICT_PAUSE = 0.005
#: PostgreSQL's deadlock_detected and serialization_failure; MySQL/MariaDB's
#: ER_LOCK_DEADLOCK
CONFLICT_SQLSTATES = frozenset({"40P01", "40001"})
MYSQL_DEADLOCK = 1213


def _sqlstate(exc: BaseException) -> str | None:
    """The driver's SQLSTATE behind a Django database error (psycopg 3 ``sqlstate``,
    psycopg2 ``pgcode``), or None."""
    cause = exc.__cause__
    code = getattr(cause, "sqlstate", None) or getattr(cause, "pgcode", None)
    return code if isinstance(code, str) else None


def terminated(exc: BaseException) -> bool:
    """Whether PostgreSQL terminated the session (``pg_terminate_backend``, SQLSTATE
    57P01): its transaction was rolled back (or had not begun), so the call changed
    nothing and may be sent again on a new connection (connection churn is no outage)."""
    return _sqlstate(exc) == "57P01"


def conflicted(exc: BaseException) -> bool:
    """Whether the database rolled the transaction back whole to break a deadlock or for
    a serialization failure (PostgreSQL 40P01 and 40001; MySQL/MariaDB errno 1213, the
    first argument of the driver's error): the call changed nothing and may be sent
    again."""
    if _sqlstate(exc) in CONFLICT_SQLSTATES:
        return True
    args: tuple[object, ...] = getattr(exc.__cause__, "args", ())
    return bool(args) and args[0] == MYSQL_DEADLOCK


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
        renewed = conflicts = 0  # resends so far, per cause
        while True:
            try:
                return fn()
            except (DatabaseError, InterfaceError) as exc:
                connection = connections[self.alias]
                if connection.in_atomic_block:
                    raise StoreError(f"Django database {self.alias!r}: {exc}") from exc
                if conflicts < CONFLICT_RETRIES and conflicted(exc):
                    # rolled back whole, the connection fine: the same call again, later
                    pause = CONFLICT_PAUSE * 2 ** conflicts * random.uniform(0.5, 1.5)
                    conflicts += 1
                    logger.debug("Django database %r: %s; sending the call again in %.0f ms",
                                 self.alias, exc, pause * 1000)
                    time.sleep(pause)
                    continue
                connection.close()  # reopened by the next call
                if renewed < TERMINATED_RETRIES and terminated(exc):
                    renewed += 1
                    continue  # rolled back: the same call again, on a new connection
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
