"""The format version a SQLite namespace records (``<table>_meta``), read on a connection
of its own so that a file of another format, which ``open()`` refuses, is read too."""

from __future__ import annotations

import asyncio
import os
import sqlite3
from typing import Any

from ..capabilities import FormatStore
from ..formats import StoredFormat
from .schema import FORMAT_VERSION, Tables, read_format


class SqliteFormat(FormatStore):
    """``stored_format`` for [`SqliteBackend`][anarchon.backends.sqlite.SqliteBackend]."""

    database: str
    busy_timeout: float
    create_tables: bool
    _tables: Tables
    _user_connection: Any

    async def stored_format(self) -> StoredFormat:
        stored = await asyncio.to_thread(self._read_format)
        return StoredFormat(
            f"table {self._tables.base}_meta in {self.database}", stored, FORMAT_VERSION,
            self.create_tables, "let the runs finish, then use another table= name (or a "
            "new file)")

    def _read_format(self) -> str | None:
        if self._user_connection is not None:  # the application's: read on its thread
            return read_format(self._user_connection.cursor(), self._tables)
        uri = self.database.startswith("file:")
        if not uri and self.database != ":memory:" and not os.path.exists(self.database):
            return None  # no file yet: nothing recorded (and nothing is created here)
        connection = sqlite3.connect(self.database, uri=uri, timeout=self.busy_timeout,
                                     check_same_thread=False)
        try:
            return read_format(connection.cursor(), self._tables)
        finally:
            connection.close()


__all__ = ["SqliteFormat"]
