"""Heartbeats and liveness records in PostgreSQL: table ``<table>_instances``.

With a record the heartbeat is still one statement: the record's upsert and the removal
of long-dead records are data-modifying CTEs of the heartbeat's statement, on the
store's clock (``now()``). The table is created on first use (``CREATE TABLE IF NOT
EXISTS``, under the setup lock), so a store created by an older anarchon needs no
migration; ``anarchon schema`` prints it for a role that may not create tables. With
``create_tables=False`` and no such table the instance keeps no record and beats as
before.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from psycopg import sql

from ..base import HeartbeatResult, HeldRun, RunKey, RunState
from ..capabilities import LivenessStore
from ..liveness import KEEP_DEAD_MS, InstanceInfo, InstanceRecord, Instances
from .parts import PostgresParts
from .queries import HEARTBEAT, SETUP_LOCK

CREATE_INSTANCES = """CREATE TABLE IF NOT EXISTS {instances} (
    id text PRIMARY KEY, record text NOT NULL, last_seen bigint NOT NULL,
    expires bigint NOT NULL)"""

_HEAD, _TAIL = HEARTBEAT.split("\nheld AS (", 1)
HEARTBEAT_LIVE = _HEAD + f"""
live AS (
    INSERT INTO {{instances}} (id, record, last_seen, expires)
    SELECT %(id)s, %(record)s, p.now_ms, p.now_ms + %(ttl_ms)s::bigint FROM p
    ON CONFLICT (id) DO UPDATE SET record = excluded.record,
        last_seen = excluded.last_seen, expires = excluded.expires
    RETURNING 1
),
dead AS (
    DELETE FROM {{instances}} d USING p WHERE d.expires < p.now_ms - {KEEP_DEAD_MS}
    RETURNING 1
),
held AS (""" + _TAIL

_LEAVE = "DELETE FROM {instances} WHERE id = %(id)s"
_READ = """SELECT id, record, last_seen, expires,
    floor(extract(epoch FROM now()) * 1000)::bigint FROM {instances} ORDER BY id"""
_EXISTS = "SELECT to_regclass(%(name)s) IS NOT NULL"
_NOW = "SELECT floor(extract(epoch FROM now()) * 1000)::bigint"


def live_queries(q: Callable[[str], sql.Composed]) -> dict[str, sql.Composed]:
    """The statements, formatted with the backend's table names."""
    return {"heartbeat": q(HEARTBEAT), "heartbeat_live": q(HEARTBEAT_LIVE),
            "create": q(CREATE_INSTANCES), "leave": q(_LEAVE), "read": q(_READ),
            "now": q(_NOW), "exists": q(_EXISTS)}


class PostgresLiveness(PostgresParts, LivenessStore):
    """``heartbeat`` / ``heartbeat_live`` / ``leave`` / ``instances`` for
    [`PostgresBackend`][anarchon.backends.postgres.PostgresBackend] (uses its sessions)."""

    _live_queries: dict[str, sql.Composed]
    create_tables: bool
    #: the table exists (None: not looked at yet)
    _instances_ready: bool | None = None

    async def _instances_table(self) -> bool:
        """Whether the table exists (created here unless ``create_tables`` is off)."""
        if self._instances_ready is not None:
            return self._instances_ready
        if not self.create_tables:
            name = self._qualified[:-1] + '_instances"'  # '"schema"."base' + '_instances"'
            [(exists,)] = await self._fetch("instances table", self._live_queries["exists"],
                                            {"name": name})
            self._instances_ready = bool(exists)
            return self._instances_ready
        async with self._session("create instances table") as session, \
                session.transaction():
            await session.fetch(sql.SQL(SETUP_LOCK), {"table": self._qualified})
            await session.fetch(self._live_queries["create"])
        self._instances_ready = True
        return True

    async def heartbeat(self, owner: str, held: Sequence[HeldRun],
                        watched: Sequence[RunKey], lease_ms: int) -> HeartbeatResult:
        """Renew held leases and read watched runs in one statement, on the connection
        reserved for heartbeats."""
        if not held and not watched:
            return HeartbeatResult(lost=frozenset(), watched=[])
        return await self._beat(self._live_queries["heartbeat"], owner, held, watched,
                                lease_ms, {})

    async def heartbeat_live(self, owner: str, held: Sequence[HeldRun],
                             watched: Sequence[RunKey], lease_ms: int, info: InstanceInfo,
                             ttl_ms: int) -> HeartbeatResult:
        """The heartbeat and the record's upsert, in one statement."""
        if not await self._instances_table():
            return await self.heartbeat(owner, held, watched, lease_ms)
        return await self._beat(self._live_queries["heartbeat_live"], owner, held, watched,
                                lease_ms, {"id": info.id, "record": info.to_json(),
                                           "ttl_ms": ttl_ms})

    async def _beat(self, query: sql.Composed, owner: str, held: Sequence[HeldRun],
                    watched: Sequence[RunKey], lease_ms: int,
                    extra: dict[str, Any]) -> HeartbeatResult:
        rows = await self._fetch("heartbeat", query, {
            "owner": owner, "lease_ms": lease_ms,
            "held_jobs": [h.name for h in held], "held_slots": [h.slot for h in held],
            "held_attempts": [h.attempt for h in held],
            "watched_jobs": [w.name for w in watched],
            "watched_slots": [w.slot for w in watched], **extra}, heartbeat=True)
        # first column: renewed (true), a watched run (false), a held run with no record
        # at all (NULL: the store forgot it)
        renewed = {RunKey(r[1], int(r[2])) for r in rows if r[0] is True}
        gone = frozenset(RunKey(r[1], int(r[2])) for r in rows if r[0] is None)
        states = [RunState(name=r[1], slot=int(r[2]), owner=r[3], attempt=int(r[4]),
                           running=bool(r[5]), lease_expired=bool(r[6]),
                           handed_over=bool(r[7]))
                  for r in rows if r[0] is False]
        lost = frozenset(h.key for h in held if h.key not in renewed)
        return HeartbeatResult(lost=lost, watched=states, gone=gone)

    async def leave(self, instance_id: str) -> None:
        if not await self._instances_table():
            return
        await self._fetch("leave", self._live_queries["leave"], {"id": instance_id},
                          heartbeat=True)

    async def instances(self) -> Instances:
        rows = (await self._fetch("instances", self._live_queries["read"])
                if await self._instances_table() else [])
        if rows:
            now = int(rows[0][4])
        else:
            [(now,)] = await self._fetch("instances", self._live_queries["now"])
        return Instances(int(now), [InstanceRecord.decode(str(r[0]), str(r[1]), int(r[2]),
                                                          int(r[3])) for r in rows])


__all__ = ["CREATE_INSTANCES", "HEARTBEAT_LIVE", "PostgresLiveness", "live_queries"]
