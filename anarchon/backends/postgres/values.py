"""Shared values in PostgreSQL: table ``<table>_values``, compare-and-set in one statement.

The table is created on first use (``CREATE TABLE IF NOT EXISTS``), so a store created
by an older anarchon needs no migration.
"""

from __future__ import annotations

import contextlib
from typing import Any

from psycopg import sql

from ...names import check_table_name
from .links import Session
from .queries import SETUP_LOCK

_CREATE = """CREATE TABLE IF NOT EXISTS {values} (
    job text NOT NULL, field text NOT NULL, value text NOT NULL,
    PRIMARY KEY (job, field))"""
_READ = "SELECT value FROM {values} WHERE job = %(job)s AND field = %(field)s"
_INSERT = """INSERT INTO {values} (job, field, value) VALUES (%(job)s, %(field)s, %(value)s)
ON CONFLICT (job, field) DO NOTHING RETURNING 1"""
_UPDATE = """UPDATE {values} SET value = %(value)s
WHERE job = %(job)s AND field = %(field)s AND value = %(expected)s RETURNING 1"""


class PostgresValues:
    """``read_value`` / ``swap_value`` for
    [`PostgresBackend`][anarchon.backends.postgres.PostgresBackend] (uses its sessions)."""

    table: str
    _qualified: str
    _values_ready: bool = False

    def _session(self, what: str, heartbeat: bool = False
                 ) -> contextlib.AbstractAsyncContextManager[Session]:
        raise NotImplementedError  # provided by PostgresBackend

    async def _fetch(self, what: str, query: Any, params: Any = None, *,
                     heartbeat: bool = False) -> list[Any]:
        raise NotImplementedError  # provided by PostgresBackend

    def _values_query(self, text: str) -> sql.Composed:
        schema, base = check_table_name(self.table)
        ident = (sql.Identifier(schema, base + "_values") if schema
                 else sql.Identifier(base + "_values"))
        return sql.SQL(text).format(values=ident)

    async def _values_table(self) -> None:
        if self._values_ready:
            return
        # under the tables' setup lock: two instances running CREATE TABLE IF NOT EXISTS
        # at once race on the catalog (the loser meets the winner's table, row type or
        # its unique index entry)
        async with self._session("create values table") as session, session.transaction():
            await session.fetch(sql.SQL(SETUP_LOCK), {"table": self._qualified})
            await session.fetch(self._values_query(_CREATE))
        self._values_ready = True

    async def read_value(self, name: str, field: str) -> str | None:
        """See
        [`anarchon.backends.base.Backend.read_value()`][anarchon.backends.base.Backend.read_value]."""
        await self._values_table()
        rows = await self._fetch("read_value", self._values_query(_READ),
                                 {"job": name, "field": field})
        return str(rows[0][0]) if rows else None

    async def swap_value(self, name: str, field: str, expected: str | None,
                         value: str) -> bool:
        """See
        [`anarchon.backends.base.Backend.swap_value()`][anarchon.backends.base.Backend.swap_value]
        (one statement)."""
        await self._values_table()
        query = _INSERT if expected is None else _UPDATE
        rows = await self._fetch("swap_value", self._values_query(query), {
            "job": name, "field": field, "value": value, "expected": expected})
        return bool(rows)


__all__ = ["PostgresValues"]
