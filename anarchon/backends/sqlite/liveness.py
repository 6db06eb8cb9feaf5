"""Liveness records in SQLite: table ``<table>_instances``, written in the heartbeat's
transaction (see ``anarchon.backends.liveness``).

The table is created on first use, so a file created by an older anarchon needs no
migration; with ``create_tables=False`` nothing is created: without the table (made from
``anarchon schema``) the instance keeps no record and beats as before.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from ..base import HeartbeatResult, HeldRun, RunKey
from ..capabilities import LivenessStore
from ..liveness import KEEP_DEAD_MS, InstanceInfo, InstanceRecord, Instances
from .parts import SqliteParts
from .schema import quote


class SqliteLiveness(SqliteParts, LivenessStore):
    """``heartbeat_live`` / ``leave`` / ``instances`` for
    [`SqliteBackend`][anarchon.backends.sqlite.SqliteBackend] (uses its thread)."""

    create_tables: bool
    #: the table exists (None: not looked at yet)
    _instances_ready: bool | None = None

    @property
    def _instances_table(self) -> str:
        return quote(self._tables.base + "_instances")

    def _ensure_instances(self, cur: sqlite3.Cursor) -> bool:
        """Whether the table exists (created here unless ``create_tables`` is off)."""
        if self._instances_ready is None:
            if self.create_tables:
                cur.execute(self._tables.instances_statement())
                self._instances_ready = True
            else:
                self._instances_ready = cur.execute(
                    "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
                    (self._tables.base + "_instances",)).fetchone() is not None
        return self._instances_ready

    async def heartbeat_live(self, owner: str, held: Sequence[HeldRun],
                             watched: Sequence[RunKey], lease_ms: int, info: InstanceInfo,
                             ttl_ms: int) -> HeartbeatResult:
        """The heartbeat and the record, in one write transaction."""
        def run(connection: sqlite3.Connection) -> HeartbeatResult:
            with self._write(connection) as cur:
                now = self._now()
                result = self._renew(cur, owner, held, watched, lease_ms, now)
                if not self._ensure_instances(cur):
                    return result
                cur.execute(
                    f"""INSERT INTO {self._instances_table} (id, record, last_seen, expires)
                        VALUES (?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET
                        record = excluded.record, last_seen = excluded.last_seen,
                        expires = excluded.expires""",
                    (info.id, info.to_json(), now, now + ttl_ms))
                cur.execute(f"DELETE FROM {self._instances_table} WHERE expires < ?",
                            (now - KEEP_DEAD_MS,))
            return result

        return await self._call(run)

    async def leave(self, instance_id: str) -> None:
        def run(connection: sqlite3.Connection) -> None:
            with self._write(connection) as cur:
                if not self._ensure_instances(cur):
                    return
                cur.execute(f"DELETE FROM {self._instances_table} WHERE id = ?",
                            (instance_id,))

        await self._call(run)

    async def instances(self) -> Instances:
        def run(connection: sqlite3.Connection) -> Instances:
            with self._write(connection) as cur:
                now = self._now()
                if not self._ensure_instances(cur):
                    return Instances(now, [])
                rows = cur.execute(f"SELECT id, record, last_seen, expires FROM "
                                   f"{self._instances_table} ORDER BY id").fetchall()
            return Instances(now, [InstanceRecord.decode(str(r[0]), str(r[1]), int(r[2]),
                                                         int(r[3])) for r in rows])

        return await self._call(run)


__all__ = ["SqliteLiveness"]
