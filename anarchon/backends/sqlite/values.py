"""Shared values in SQLite: table ``<table>_values``, compare-and-set in one transaction.

The table is created on first use, so a file created by an older anarchon needs no
migration.
"""

from __future__ import annotations

import sqlite3
from typing import Any, TypeVar

from ..capabilities import ValueStore
from .parts import SqliteParts
from .schema import quote

T = TypeVar("T")


class SqliteValues(SqliteParts, ValueStore):
    """``read_value`` / ``swap_value`` for [`SqliteBackend`][anarchon.backends.sqlite.SqliteBackend]
    (uses its thread)."""

    _values_ready: bool = False

    @property
    def _values(self) -> str:
        return quote(self._tables.base + "_values")

    def _ensure_values(self, cursor: sqlite3.Cursor) -> None:
        if not self._values_ready:
            cursor.execute(self._tables.values_statement())
            self._values_ready = True

    async def read_value(self, name: str, field: str) -> str | None:
        """See
        [`ValueStore.read_value()`][anarchon.backends.capabilities.ValueStore.read_value]."""
        def run(connection: sqlite3.Connection) -> str | None:
            if not self._values_ready:
                with self._write(connection) as cur:
                    self._ensure_values(cur)
            rows = connection.execute(f"SELECT value FROM {self._values} WHERE job = ? AND "
                                      "field = ?", (name, field)).fetchall()
            return str(rows[0][0]) if rows else None

        return await self._call(run)

    async def swap_value(self, name: str, field: str, expected: str | None,
                         value: str) -> bool:
        """See
        [`ValueStore.swap_value()`][anarchon.backends.capabilities.ValueStore.swap_value]
        (``BEGIN IMMEDIATE``)."""
        def run(connection: sqlite3.Connection) -> bool:
            with self._write(connection) as cur:
                self._ensure_values(cur)
                rows: list[Any] = cur.execute(
                    f"SELECT value FROM {self._values} WHERE job = ? AND field = ?",
                    (name, field)).fetchall()
                current = str(rows[0][0]) if rows else None
                if current != expected:
                    return False
                cur.execute(f"INSERT OR REPLACE INTO {self._values} (job, field, value) "
                            "VALUES (?, ?, ?)", (name, field, value))
            return True

        return await self._call(run)


__all__ = ["SqliteValues"]
