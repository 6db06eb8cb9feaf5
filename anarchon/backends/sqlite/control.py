"""Runtime control in SQLite: tables ``<table>_control``, ``_changes`` and ``_offers``;
the generation is a row of ``<table>_meta``. Each change is one ``BEGIN IMMEDIATE``
transaction; the version fence is a read inside the claim's transaction
(``transactions.claim``)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import Any, TypeVar

from ..base import Poll
from ..capabilities import ControlStore
from ..control import (
    CHANGE_LOG_SIZE,
    OFFER_TTL_MS,
    ControlChange,
    ControlRecord,
    ControlSnapshot,
)
from .parts import SqliteParts
from .transactions import first

T = TypeVar("T")
_GENERATION = "control_generation"


class SqliteControl(SqliteParts, ControlStore):
    """The control calls of [`SqliteBackend`][anarchon.backends.sqlite.SqliteBackend]
    (on its thread)."""

    def _generation(self, connection: sqlite3.Connection | sqlite3.Cursor) -> int:
        row = first(connection.execute(
            f"SELECT value FROM {self._tables.meta} WHERE key = ?", (_GENERATION,)))
        return 0 if row is None else int(row[0])

    async def poll(self, names: Sequence[str]) -> Poll:
        """Triggers and the generation in one call on the backend's thread."""
        def run(connection: sqlite3.Connection) -> Poll:
            return Poll(self._take(connection, names), self._generation(connection))

        return await self._call(run)

    async def read_controls(self) -> ControlSnapshot:
        t = self._tables

        def run(connection: sqlite3.Connection) -> ControlSnapshot:
            with self._write(connection) as cur:  # one consistent read
                generation = self._generation(cur)
                rows = cur.execute(f"SELECT job, version, record FROM {t.control}").fetchall()
                offers = cur.execute(f"SELECT instance, handlers FROM {t.offers} WHERE seen > ?",
                                     (self._now() - OFFER_TTL_MS,)).fetchall()
            return ControlSnapshot(
                generation,
                {job: ControlRecord(job, version, record) for job, version, record in rows},
                {instance: tuple(json.loads(handlers)) for instance, handlers in offers})

        return await self._call(run)

    async def change_control(self, change: ControlChange) -> int:
        t = self._tables

        def run(connection: sqlite3.Connection) -> int:
            now = self._now()
            with self._write(connection) as cur:
                row = first(cur.execute(f"SELECT version FROM {t.control} WHERE job = ?",
                                        (change.name,)))
                if (0 if row is None else int(row[0])) != change.expected_version:
                    return 0
                version = change.expected_version + 1
                cur.execute(f"""INSERT INTO {t.control} (job, version, record, changed)
                                VALUES (?, ?, ?, ?) ON CONFLICT (job) DO UPDATE SET
                                version = excluded.version, record = excluded.record,
                                changed = excluded.changed""",
                            (change.name, version, change.text, now))
                cur.execute(f"""INSERT INTO {t.meta} (key, value) VALUES (?, '1')
                                ON CONFLICT (key) DO UPDATE SET
                                value = CAST(CAST(value AS INTEGER) + 1 AS TEXT)""",
                            (_GENERATION,))
                cur.execute(f"INSERT INTO {t.changes} (job, changed, entry) VALUES (?, ?, ?)",
                            (change.name, now, change.entry))
                cur.execute(f"""DELETE FROM {t.changes} WHERE job = ? AND id NOT IN (
                                SELECT id FROM {t.changes} WHERE job = ?
                                ORDER BY id DESC LIMIT ?)""",
                            (change.name, change.name, CHANGE_LOG_SIZE))
            return version

        return await self._call(run)

    async def change_log(self, name: str, count: int) -> list[str]:
        def run(connection: sqlite3.Connection) -> list[str]:
            rows: list[Any] = connection.execute(
                f"SELECT entry FROM {self._tables.changes} WHERE job = ? ORDER BY id DESC "
                "LIMIT ?", (name, count)).fetchall()
            return [str(row[0]) for row in rows]

        return await self._call(run)

    async def offer_handlers(self, instance_id: str, handlers: Sequence[str]) -> None:
        t = self._tables

        def run(connection: sqlite3.Connection) -> None:
            with self._write(connection) as cur:
                if handlers:
                    cur.execute(f"""INSERT INTO {t.offers} (instance, handlers, seen)
                                    VALUES (?, ?, ?) ON CONFLICT (instance) DO UPDATE SET
                                    handlers = excluded.handlers, seen = excluded.seen""",
                                (instance_id, json.dumps(list(handlers)), self._now()))
                else:
                    cur.execute(f"DELETE FROM {t.offers} WHERE instance = ?", (instance_id,))

        await self._call(run)


__all__ = ["SqliteControl"]
