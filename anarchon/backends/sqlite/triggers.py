"""Manual-run requests in SQLite (table ``<table>_triggers``), by the rules of
``anarchon.backends.trigger_rules``: the exclusivity check and the insert are one
``BEGIN IMMEDIATE`` transaction, so two requesters never both store a request."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import TypeVar

from ..capabilities import TriggerStore
from ..trigger_rules import TriggerRequest, refused
from .parts import SqliteParts
from .schema import quote
from .transactions import first

T = TypeVar("T")


class SqliteTriggers(SqliteParts, TriggerStore):
    """The trigger calls of [`SqliteBackend`][anarchon.backends.sqlite.SqliteBackend]."""

    async def request_trigger(self, name: str, data: str | None, *,
                              exclusive: bool = False) -> str:
        """Store a manual-run request (refused, with ``exclusive``, while one of ``name``
        is pending or running: see ``anarchon.backends.trigger_rules``)."""
        t = self._tables

        def run(connection: sqlite3.Connection) -> str:
            with self._write(connection) as cur:
                now = self._now()
                if exclusive:
                    if first(cur.execute(
                            f"SELECT 1 FROM {t.triggers} WHERE job = ? AND requested_at >= ?",
                            (name, now - self.trigger_ttl_ms()))) is not None:
                        raise refused(name, "pending")
                    if first(cur.execute(
                            f"""SELECT 1 FROM {t.attempts}
                                WHERE job = ? AND manual = 1 AND status = 'running'
                                  AND started_at >= ?""",
                            (name, now - self.stale_manual_ms()))) is not None:
                        raise refused(name, "running")
                cur.execute(f"INSERT INTO {t.triggers} (job, data, requested_at) "
                            "VALUES (?, ?, ?)", (name, data, now))
                return str(cur.lastrowid)

        return await self._call(run)

    async def take_triggers(self, names: Sequence[str]) -> list[TriggerRequest]:
        """Take the live requests for ``names``; expired ones are deleted unrun."""
        return await self._call(lambda connection: self._take(connection, names))

    def _take(self, connection: sqlite3.Connection, names: Sequence[str]
              ) -> list[TriggerRequest]:
        t = self._tables
        if first(connection.execute(f"SELECT 1 FROM {t.triggers} LIMIT 1")) is None:
            return []  # the common case: a read, no write lock
        with self._write(connection) as cur:
            cur.execute(f"DELETE FROM {t.triggers} WHERE requested_at < ?",
                        (self._now() - self.trigger_ttl_ms(),))
            rows = cur.execute(
                f"""DELETE FROM {t.triggers}
                    WHERE job IN (SELECT value FROM json_each(?))
                    RETURNING id, job, data""",
                (json.dumps(list(names)),),
            ).fetchall()
        rows.sort(key=lambda row: int(row[0]))
        return [TriggerRequest(str(i), job, data) for i, job, data in rows]

    async def forget(self, name: str) -> int:
        """Delete job ``name``'s registration, runs, history, requests and shared values
        (one transaction); how many rows."""
        t = self._tables
        values = quote(t.base + "_values")

        def run(connection: sqlite3.Connection) -> int:
            with self._write(connection) as cur:
                removed = 0
                for table, column in ((t.triggers, "job"), (t.attempts, "job"),
                                      (t.runs, "job"), (t.jobs, "name")):
                    removed += cur.execute(f"DELETE FROM {table} WHERE {column} = ?",
                                           (name,)).rowcount
                if first(cur.execute("SELECT 1 FROM sqlite_master WHERE name = ?",
                                     (t.base + "_values",))) is not None:
                    removed += cur.execute(f"DELETE FROM {values} WHERE job = ?",
                                           (name,)).rowcount
                return removed

        return await self._call(run)
