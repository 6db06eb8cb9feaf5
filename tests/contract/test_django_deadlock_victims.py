"""The Django store: a call whose transaction is a deadlock's victim is sent again.

The database rolled the victim's transaction back whole (InnoDB errno 1213, PostgreSQL
40P01), so the backend's ORM thread sends the same call again (``OrmThread._run``) and
the caller gets its answer, not a ``StoreError``: a store hiccup is no lost slot. Here a
call run through the backend's own ORM thread takes row 1 of a scratch table, then row
2, while a second connection holds row 2 and waits for row 1; the call is made the
victim (PostgreSQL: its ``deadlock_timeout`` is the shorter, so its backend detects the
deadlock; InnoDB: it changed fewer rows). Any other database error still raises
``StoreError`` at once."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest

from anarchon.backends.base import Backend
from anarchon.errors import StoreError
from tests.conftest import only_lease_stores
from tests.support import run

#: rows the other transaction changes first on InnoDB, so that it is the heavier one
BALLAST = 50
#: how long each side waits for the other's step (seconds)
STEP = 10.0
#: between two looks at whether the other waits for a lock (seconds): InnoDB refreshes
#: what information_schema.INNODB_TRX shows only when it was last read over 0.1 s ago
POLL = {"postgresql": 0.005, "mysql": 0.15}


def _execute(alias: str, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    from django.db import connections

    with connections[alias].cursor() as cursor:
        cursor.execute(sql, params)
        return list(cursor.fetchall()) if cursor.description else []


def _session(alias: str) -> int:
    from django.db import connections

    vendor = connections[alias].vendor
    sql = "SELECT pg_backend_pid()" if vendor == "postgresql" else "SELECT CONNECTION_ID()"
    return int(_execute(alias, sql)[0][0])


def _waits_for_a_lock(alias: str, session: int) -> bool:
    from django.db import connections

    if connections[alias].vendor == "postgresql":
        sql = ("SELECT count(*) FROM pg_stat_activity WHERE pid = %s "
               "AND wait_event_type = 'Lock'")
    else:
        sql = ("SELECT count(*) FROM information_schema.INNODB_TRX "
               "WHERE trx_mysql_thread_id = %s AND trx_state = 'LOCK WAIT'")
    return bool(_execute(alias, sql, (session,))[0][0])


class Collision:
    """A call (``victim``) and another connection's transaction (``other``, in a thread
    of its own) that deadlock on rows 1 and 2 of ``table``, the call's first try being
    the victim."""

    def __init__(self, alias: str, table: str) -> None:
        self.alias = alias
        self.table = table
        self.tries = 0
        self.victim_holds_1 = threading.Event()
        self.other_holds_2 = threading.Event()
        self.other_session: list[int] = []
        self.other_error: list[BaseException] = []

    def _bump(self, where: str) -> None:
        _execute(self.alias, f"UPDATE {self.table} SET v = v + 1 WHERE {where}")

    def victim(self) -> str:
        """The call: row 1, then (the first time, once the other waits for row 1) row 2."""
        from django.db import connections, transaction

        self.tries += 1
        with transaction.atomic(using=self.alias):
            if connections[self.alias].vendor == "postgresql":
                _execute(self.alias, "SET LOCAL deadlock_timeout = '50ms'")
            self._bump("id = 1")
            if self.tries == 1:
                self.victim_holds_1.set()
                assert self.other_holds_2.wait(STEP), "the other transaction never took row 2"
                deadline = time.monotonic() + STEP
                while not _waits_for_a_lock(self.alias, self.other_session[0]):
                    assert not self.other_error, self.other_error
                    assert time.monotonic() < deadline, "the other never waited for row 1"
                    time.sleep(POLL[connections[self.alias].vendor])
            self._bump("id = 2")  # the first time: the deadlock, this transaction its victim
        return "answer"

    def other(self) -> None:
        """The other transaction, on a connection of this thread's own: many rows (on
        InnoDB), row 2, then row 1 once the call holds it."""
        from django.db import connections, transaction

        try:
            self.other_session.append(_session(self.alias))
            with transaction.atomic(using=self.alias):
                if connections[self.alias].vendor == "postgresql":
                    _execute(self.alias, "SET LOCAL deadlock_timeout = '5s'")
                else:
                    self._bump("id > 2")
                self._bump("id = 2")
                self.other_holds_2.set()
                assert self.victim_holds_1.wait(STEP), "the call never took row 1"
                self._bump("id = 1")  # waits until the call's first try is rolled back
        except BaseException as exc:  # reported by the test
            self.other_error.append(exc)
            self.other_holds_2.set()
        finally:
            connections[self.alias].close()


@asynccontextmanager
async def scratch(make_backend: Callable[[], Backend]) -> AsyncIterator[tuple[Any, str]]:
    """An opened backend and a scratch table of rows 1 .. BALLAST + 2 (``v`` = 0) in its
    database; the table is dropped and the backend closed afterwards."""
    backend: Any = make_backend()
    await backend.open()
    alias = backend.alias
    table = "scratch_" + uuid.uuid4().hex[:12]

    def create() -> None:
        _execute(alias, f"CREATE TABLE {table} (id INTEGER PRIMARY KEY, v INTEGER NOT NULL)")
        _execute(alias, f"INSERT INTO {table} (id, v) VALUES "
                 + ", ".join(f"({n}, 0)" for n in range(1, BALLAST + 3)))

    await backend._thread.call(create)
    try:
        yield backend, table
    finally:
        await backend._thread.call(lambda: _execute(alias, f"DROP TABLE {table}"))
        await backend.close()


@only_lease_stores("django-mariadb", "django-postgres")
def test_a_deadlock_victim_is_sent_again_and_answers(
        make_backend: Callable[[], Backend]) -> None:
    async def scenario() -> None:
        async with scratch(make_backend) as (backend, table):
            collision = Collision(backend.alias, table)
            other = threading.Thread(target=collision.other, name="other-transaction")
            other.start()
            try:
                answer = await backend._thread.call(collision.victim)  # no StoreError
            finally:
                other.join(2 * STEP)
            assert not collision.other_error, collision.other_error
            assert answer == "answer"
            assert collision.tries == 2  # the victim, then the resend
            rows = await backend._thread.call(lambda: _execute(
                backend.alias, f"SELECT v FROM {table} WHERE id <= 2 ORDER BY id"))
            assert [v for (v,) in rows] == [2, 2]  # the other's bump and the resend's, once

    run(scenario())


@only_lease_stores("django-mariadb", "django-postgres")
def test_another_database_error_raises_store_error_at_once(
        make_backend: Callable[[], Backend]) -> None:
    async def scenario() -> None:
        async with scratch(make_backend) as (backend, table):
            tries: list[int] = []

            def wrong() -> None:
                tries.append(1)
                _execute(backend.alias, f"UPDATE {table} SET missing = 1")

            with pytest.raises(StoreError, match=backend.alias):
                await backend._thread.call(wrong)
            assert len(tries) == 1
            # and the next call works (on a new connection)
            rows = await backend._thread.call(
                lambda: _execute(backend.alias, f"SELECT count(*) FROM {table}"))
            assert rows == [(BALLAST + 2,)]

    run(scenario())
