"""Skip records on SQLite (the rules: ``anarchon.backends.skips``), inside the caller's
``BEGIN IMMEDIATE`` transaction. The unique index on non-manual ``(job, slot, attempt)``
keeps one record per slot (``INSERT OR IGNORE``)."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from ..skips import Skip
from .schema import Tables
from .transactions import first, prune


def record_skips(cur: sqlite3.Cursor, t: Tables, skips: Sequence[Skip], now: int) -> None:
    """Write each skip's record (at most one per slot), then bound each job's skip
    records by its newest skip's limits (apart from its attempts)."""
    for skip in skips:
        if skip.reason == "late" and first(cur.execute(
                f"SELECT 1 FROM {t.runs} WHERE job = ? AND slot = ?", (skip.name, skip.slot))):
            continue  # the slot has a run: claimed in time by another instance
        cur.execute(
            f"""INSERT OR IGNORE INTO {t.attempts}
                (job, slot, attempt, instance, manual, reason, status, started_at,
                 finished_at)
                VALUES (?, ?, 0, ?, 0, ?, 'skipped', ?, ?)""",
            (skip.name, skip.slot, skip.owner, skip.reason, now, now),
        )
    for skip in {s.name: s for s in skips}.values():
        prune(cur, t, skip.name, skip.history_size, skip.history_ttl_ms, now, skips=True)
