"""What the parts of [`SqliteBackend`][anarchon.backends.sqlite.SqliteBackend] (control,
triggers, values) use of it: its tables, its thread and its write transactions."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TypeVar

from .schema import Tables

T = TypeVar("T")


class SqliteParts:
    """The backend's plumbing, as its mixins see it (``SqliteBackend`` provides it)."""

    _tables: Tables

    async def _call(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        raise NotImplementedError  # provided by SqliteBackend

    def _write(self, connection: sqlite3.Connection
               ) -> AbstractContextManager[sqlite3.Cursor]:
        raise NotImplementedError  # provided by SqliteBackend

    def _now(self) -> int:
        raise NotImplementedError  # provided by SqliteBackend
