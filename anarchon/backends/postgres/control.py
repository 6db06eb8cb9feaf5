"""Runtime control in PostgreSQL: tables ``<table>_control`` (a record per job),
``<table>_changes`` (the change logs) and ``<table>_offers`` (handler offers); the
generation is the ``control_generation`` row of ``<table>_meta``.

The tables are created at every ``open()`` with ``CREATE TABLE IF NOT EXISTS``, so a
namespace made by an older anarchon gains them without a format change (older versions
ignore them). A change is one transaction in one round trip: the job's advisory lock
(the claims' lock, so a change and a claim of one job never interleave), then one
statement that compare-and-sets the record, raises the generation, appends to the log,
trims it and ``NOTIFY``s (delivered at commit). The version fence is a subselect of the
claim statement (``queries.CLAIM_NEW``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Final

from ..base import Poll, TriggerRequest
from ..capabilities import ControlStore
from ..control import (
    CHANGE_LOG_SIZE,
    OFFER_TTL_MS,
    ControlChange,
    ControlRecord,
    ControlSnapshot,
)
from .parts import PostgresParts
from .queries import _NOW_MS

_GENERATION: Final = ("COALESCE((SELECT g.value::bigint FROM {meta} g "
                      "WHERE g.key = 'control_generation'), 0)")

CREATE: Final = (
    """CREATE TABLE IF NOT EXISTS {control} (
        job text PRIMARY KEY,
        version integer NOT NULL,
        record text NOT NULL,
        changed bigint NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS {changes} (
        id bigserial PRIMARY KEY,
        job text NOT NULL,
        changed bigint NOT NULL,
        entry text NOT NULL)""",
    "CREATE INDEX IF NOT EXISTS {changes_job} ON {changes} (job, id)",
    """CREATE TABLE IF NOT EXISTS {offers} (
        instance text PRIMARY KEY,
        handlers text NOT NULL,
        seen bigint NOT NULL)""",
)

# The trigger take and the generation: one statement, so one round trip and one snapshot.
# The LEFT JOIN gives one row (the generation, no trigger) when nothing is pending;
# expired requests are deleted and not returned (``triggers.TAKE``).
POLL: Final = f"""
WITH taken AS (
    DELETE FROM {{triggers}}
    WHERE job = ANY(%(names)s::text[]) OR requested_at < {_NOW_MS} - %(ttl_ms)s
    RETURNING id, job, data, requested_at
)
SELECT {_GENERATION}, t.id, t.job, t.data
FROM (SELECT 1) AS one LEFT JOIN taken t
    ON t.job = ANY(%(names)s::text[]) AND t.requested_at >= {_NOW_MS} - %(ttl_ms)s
ORDER BY t.id
"""

# Generation, records and live offers from one statement's snapshot.
READ: Final = f"""
SELECT 'g', '', {_GENERATION}, ''
UNION ALL
SELECT 'r', c.job, c.version, c.record FROM {{control}} c
UNION ALL
SELECT 'o', o.instance, 0, o.handlers FROM {{offers}} o
WHERE o.seen > {_NOW_MS} - {OFFER_TTL_MS}
"""

# Runs after the job's advisory lock. All the CTEs see one snapshot (taken after the
# lock), so the trim keeps the newest CHANGE_LOG_SIZE - 1 older entries beside the new one.
CHANGE: Final = f"""
WITH p AS (
    SELECT %(job)s::text AS job, %(expected)s::integer AS expected,
           %(record)s::text AS record, %(entry)s::text AS entry, {_NOW_MS} AS now_ms
),
updated AS (
    UPDATE {{control}} c SET version = c.version + 1, record = p.record, changed = p.now_ms
    FROM p
    WHERE p.expected > 0 AND c.job = p.job AND c.version = p.expected
    RETURNING c.version
),
inserted AS (
    INSERT INTO {{control}} (job, version, record, changed)
    SELECT p.job, 1, p.record, p.now_ms FROM p WHERE p.expected = 0
    ON CONFLICT (job) DO NOTHING
    RETURNING version
),
done AS (SELECT version FROM updated UNION ALL SELECT version FROM inserted),
generation AS (
    INSERT INTO {{meta}} AS m (key, value)
    SELECT 'control_generation', '1' FROM done
    ON CONFLICT (key) DO UPDATE SET value = (m.value::bigint + 1)::text
    RETURNING m.value
),
logged AS (
    INSERT INTO {{changes}} (job, changed, entry)
    SELECT p.job, p.now_ms, p.entry FROM p, done
    RETURNING id
),
trimmed AS (
    DELETE FROM {{changes}} l
    USING p, done
    WHERE l.job = p.job AND l.id NOT IN (
        SELECT k.id FROM {{changes}} k WHERE k.job = p.job
        ORDER BY k.id DESC LIMIT {CHANGE_LOG_SIZE - 1})
    RETURNING l.id
)
SELECT d.version,
       pg_notify(%(channel)s, json_build_object('k', 'changed', 'job', p.job)::text)
FROM done d, p
"""

CHANGE_LOG: Final = """
SELECT entry FROM {changes} WHERE job = %(job)s ORDER BY id DESC LIMIT %(count)s
"""

OFFER: Final = f"""
INSERT INTO {{offers}} (instance, handlers, seen) VALUES (%(instance)s, %(handlers)s, {_NOW_MS})
ON CONFLICT (instance) DO UPDATE SET handlers = EXCLUDED.handlers, seen = EXCLUDED.seen
"""

WITHDRAW: Final = "DELETE FROM {offers} WHERE instance = %(instance)s"


class PostgresControl(PostgresParts, ControlStore):
    """The control calls of
    [`PostgresBackend`][anarchon.backends.postgres.PostgresBackend] (on its sessions)."""

    async def poll(self, names: Sequence[str]) -> Poll:
        """Take the pending trigger requests of these jobs and read the generation, in
        one statement."""
        rows = await self._fetch("poll", self._control_queries["poll"],
                                 {"names": list(names), "ttl_ms": self.trigger_ttl_ms()})
        triggers = [TriggerRequest(str(i), job, data)
                    for _, i, job, data in rows if i is not None]
        return Poll(triggers, int(rows[0][0]))

    async def read_controls(self) -> ControlSnapshot:
        """The generation, every record and the live offers, from one snapshot."""
        rows = await self._fetch("read_controls", self._control_queries["read"])
        generation = 0
        records: dict[str, ControlRecord] = {}
        offers: dict[str, tuple[str, ...]] = {}
        for kind, key, number, text in rows:
            if kind == "g":
                generation = int(number)
            elif kind == "r":
                records[key] = ControlRecord(key, int(number), text)
            else:
                offers[key] = tuple(json.loads(text))
        return ControlSnapshot(generation, records, offers)

    async def change_control(self, change: ControlChange) -> int:
        """Compare-and-set job ``change.name``'s record, raise the generation, log the
        change and announce it: one transaction, one round trip. 0 if the stored version
        was not ``change.expected_version``."""
        results = await self._serialised("change_control", [
            (self._control_queries["lock"], {"table": self._qualified, "jobs": [change.name]}),
            (self._control_queries["change"], {
                "job": change.name, "expected": change.expected_version,
                "record": change.text, "entry": change.entry, "channel": self.channel}),
        ])
        rows = results[-1]
        return int(rows[0][0]) if rows else 0

    async def change_log(self, name: str, count: int) -> list[str]:
        """Job ``name``'s newest ``count`` change-log entries, newest first."""
        if count <= 0:
            return []
        rows = await self._fetch("change_log", self._control_queries["log"],
                                 {"job": name, "count": count})
        return [str(row[0]) for row in rows]

    async def offer_handlers(self, instance_id: str, handlers: Sequence[str]) -> None:
        """Store this instance's handler names, stamped with the server's clock (no
        names: withdraw its offer)."""
        if handlers:
            await self._fetch("offer_handlers", self._control_queries["offer"], {
                "instance": instance_id, "handlers": json.dumps(list(handlers))})
        else:
            await self._fetch("offer_handlers", self._control_queries["withdraw"],
                              {"instance": instance_id})


__all__ = ["PostgresControl"]
