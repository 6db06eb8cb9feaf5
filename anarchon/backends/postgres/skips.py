"""Skip records on PostgreSQL (the rules: ``anarchon.backends.skips``): one transaction,
one round trip. The jobs' advisory locks (the claims' own) come first, so two instances
recording the same slot queue and the second sees the first's record."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from ..skips import Skip
from .links import Query, Statement
from .queries import _NOW_MS, PRUNE_SKIPS

RECORD_SKIPS: Final = f"""
WITH p AS (
    SELECT s.*, {_NOW_MS} AS now_ms
    FROM unnest(%(jobs)s::text[], %(slots)s::bigint[], %(owners)s::text[],
                %(reasons)s::text[], %(history_sizes)s::integer[],
                %(history_ttl_ms)s::bigint[])
         AS s(job, slot, owner, reason, history_size, history_ttl_ms)
),
added AS (
    INSERT INTO {{attempts}}
        (job, slot, attempt, instance, manual, reason, status, started_at, finished_at)
    SELECT p.job, p.slot, 0, p.owner, false, p.reason, 'skipped', p.now_ms, p.now_ms
    FROM p
    WHERE NOT EXISTS (SELECT 1 FROM {{attempts}} a
                      WHERE a.job = p.job AND a.slot = p.slot AND a.attempt = 0
                        AND NOT a.manual)
      AND (p.reason = 'overlap'
           OR NOT EXISTS (SELECT 1 FROM {{runs}} r WHERE r.job = p.job AND r.slot = p.slot))
    RETURNING job
),
{PRUNE_SKIPS.format(source="p")}
SELECT (SELECT count(*) FROM added), (SELECT count(*) FROM pruned)
"""


def skip_statements(table: str, lock: Query, record: Query, skips: Sequence[Skip]
                    ) -> list[Statement]:
    """The jobs' locks, then the records (``skips`` hold one per slot: ``check_skips``)."""
    return [
        (lock, {"table": table, "jobs": sorted({s.name for s in skips})}),
        (record, {
            "jobs": [s.name for s in skips], "slots": [s.slot for s in skips],
            "owners": [s.owner for s in skips], "reasons": [s.reason for s in skips],
            "history_sizes": [max(1, s.history_size) for s in skips],
            "history_ttl_ms": [s.history_ttl_ms for s in skips]}),
    ]

