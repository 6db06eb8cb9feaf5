"""Shared values in PostgreSQL: table ``<table>_values``, compare-and-set in one statement.

The table is created on first use (``CREATE TABLE IF NOT EXISTS``), so a store created
by an older anarchon needs no migration.
"""

from __future__ import annotations

from psycopg import sql

from ...jobs.name_checks import check_table_name
from ..capabilities import ValueStore
from .parts import PostgresParts
from .queries import SETUP_LOCK

CREATE_VALUES = """CREATE TABLE IF NOT EXISTS {values} (
    job text NOT NULL, field text NOT NULL, value text NOT NULL,
    PRIMARY KEY (job, field))"""
_READ = "SELECT value FROM {values} WHERE job = %(job)s AND field = %(field)s"
_INSERT = """INSERT INTO {values} (job, field, value) VALUES (%(job)s, %(field)s, %(value)s)
ON CONFLICT (job, field) DO NOTHING RETURNING 1"""
_UPDATE = """UPDATE {values} SET value = %(value)s
WHERE job = %(job)s AND field = %(field)s AND value = %(expected)s RETURNING 1"""


class PostgresValues(PostgresParts, ValueStore):
    """``read_value`` / ``swap_value`` for
    [`PostgresBackend`][anarchon.backends.postgres.PostgresBackend] (uses its sessions)."""

    _values_ready: bool = False

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
            await session.fetch(self._values_query(CREATE_VALUES))
        self._values_ready = True

    async def purge_values(self) -> int:
        """Delete every shared value of the namespace (``purge``); how many."""
        [(exists,)] = await self._fetch("purge values", sql.SQL(
            "SELECT to_regclass(%(values)s) IS NOT NULL"), {"values": self._values_name()})
        if not exists:
            return 0
        rows = await self._fetch("purge values", self._values_query(
            "WITH d AS (DELETE FROM {values} RETURNING 1) SELECT count(*) FROM d"))
        return int(rows[0][0])

    def _values_name(self) -> str:
        schema, base = check_table_name(self.table)
        return (f'"{schema}".' if schema else "") + f'"{base}_values"'

    async def read_value(self, name: str, field: str) -> str | None:
        """See
        [`ValueStore.read_value()`][anarchon.backends.capabilities.ValueStore.read_value]."""
        await self._values_table()
        rows = await self._fetch("read_value", self._values_query(_READ),
                                 {"job": name, "field": field})
        return str(rows[0][0]) if rows else None

    async def swap_value(self, name: str, field: str, expected: str | None,
                         value: str) -> bool:
        """See
        [`ValueStore.swap_value()`][anarchon.backends.capabilities.ValueStore.swap_value]
        (one statement)."""
        await self._values_table()
        query = _INSERT if expected is None else _UPDATE
        rows = await self._fetch("swap_value", self._values_query(query), {
            "job": name, "field": field, "value": value, "expected": expected})
        return bool(rows)


__all__ = ["CREATE_VALUES", "PostgresValues"]
