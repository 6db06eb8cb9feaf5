"""Manual-run requests in PostgreSQL (table ``<table>_triggers``), by the rules of
``anarchon.backends.trigger_rules``.

An exclusive request is one transaction in one round trip: the job's advisory lock (the
claims' lock), then one statement that checks for a live request or a running manual
attempt and inserts only if there is neither, so two requesters never both store one.
The take (and the poll, ``control.POLL``) deletes expired requests and returns only live
ones. Every value is a bound parameter; table names are ``psycopg.sql`` identifiers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Final

from psycopg import sql

from ..capabilities import TriggerStore
from ..trigger_rules import TriggerRequest, refused
from .queries import _NOW_MS
from .values import PostgresValues

# After the job's lock: one snapshot decides, then inserts (or not) and NOTIFYs.
REQUEST: Final = f"""
WITH blocked AS (
    SELECT CASE
        WHEN NOT %(exclusive)s THEN NULL
        WHEN EXISTS (SELECT 1 FROM {{triggers}} t WHERE t.job = %(job)s
                     AND t.requested_at >= {_NOW_MS} - %(ttl_ms)s) THEN 'pending'
        WHEN EXISTS (SELECT 1 FROM {{attempts}} a WHERE a.job = %(job)s AND a.manual
                     AND a.status = 'running'
                     AND a.started_at >= {_NOW_MS} - %(stale_ms)s) THEN 'running'
    END AS why
), requested AS (
    INSERT INTO {{triggers}} (job, data, requested_at)
    SELECT %(job)s, %(data)s, {_NOW_MS} FROM blocked WHERE why IS NULL
    RETURNING id
)
SELECT b.why, r.id,
       (SELECT count(*) FROM (SELECT pg_notify(%(channel)s, json_build_object(
            'k', 'trigger', 'job', %(job)s::text)::text) FROM requested) AS n)
FROM blocked b LEFT JOIN requested r ON true
"""

# One statement: concurrent takers never get the same row; expired rows go unreturned.
TAKE: Final = f"""
WITH taken AS (
    DELETE FROM {{triggers}}
    WHERE job = ANY(%(names)s::text[]) OR requested_at < {_NOW_MS} - %(ttl_ms)s
    RETURNING id, job, data, requested_at
)
SELECT id, job, data FROM taken
WHERE job = ANY(%(names)s::text[]) AND requested_at >= {_NOW_MS} - %(ttl_ms)s
ORDER BY id
"""

# After the job's lock: every row of the job (shared values are a separate statement:
# that table exists only once a value was stored).
FORGET: Final = """
WITH t AS (DELETE FROM {triggers} WHERE job = %(job)s RETURNING 1),
     a AS (DELETE FROM {attempts} WHERE job = %(job)s RETURNING 1),
     r AS (DELETE FROM {runs} WHERE job = %(job)s RETURNING 1),
     j AS (DELETE FROM {jobs} WHERE name = %(job)s RETURNING 1)
SELECT (SELECT count(*) FROM t) + (SELECT count(*) FROM a) + (SELECT count(*) FROM r)
       + (SELECT count(*) FROM j)
"""
FORGET_VALUES: Final = "DELETE FROM {values} WHERE job = %(job)s RETURNING 1"


def trigger_queries(q: Callable[[str], sql.Composed]) -> dict[str, sql.Composed]:
    """The composed statements of one namespace."""
    return {"request": q(REQUEST), "take": q(TAKE), "forget": q(FORGET)}


class PostgresTriggers(PostgresValues, TriggerStore):
    """The trigger calls of [`PostgresBackend`][anarchon.backends.postgres.PostgresBackend]."""

    def _lock(self, name: str) -> tuple[Any, dict[str, Any]]:
        return (self._control_queries["lock"], {"table": self._qualified, "jobs": [name]})

    async def request_trigger(self, name: str, data: str | None, *,
                              exclusive: bool = False) -> str:
        """Store a manual-run request (refused, with ``exclusive``, while one of ``name``
        is pending or running); the NOTIFY wakes the instances at commit."""
        results = await self._serialised("trigger", [self._lock(name), (
            self._trigger_queries["request"],
            {"job": name, "data": data, "channel": self.channel, "exclusive": exclusive,
             "ttl_ms": self.trigger_ttl_ms(), "stale_ms": self.stale_manual_ms()})])
        why, ident, _ = results[-1][0]
        if why is not None:
            raise refused(name, why)
        return str(ident)

    async def take_triggers(self, names: Sequence[str]) -> list[TriggerRequest]:
        """Take the live requests for these jobs (one statement); expired ones are
        deleted unrun."""
        rows = await self._fetch("take_triggers", self._trigger_queries["take"],
                                 {"names": list(names), "ttl_ms": self.trigger_ttl_ms()})
        return [TriggerRequest(str(i), job, data) for i, job, data in rows]

    async def forget(self, name: str) -> int:
        """Delete job ``name``'s registration, runs, history, requests and shared values
        (one transaction, under the job's lock); how many rows."""
        results = await self._serialised("forget", [
            self._lock(name), (self._trigger_queries["forget"], {"job": name})])
        removed = int(results[-1][0][0])
        await self._values_table()
        rows = await self._fetch("forget", self._values_query(FORGET_VALUES), {"job": name})
        return removed + len(rows)
