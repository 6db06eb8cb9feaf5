"""SQLite's transactions that judge a claim, record an outcome and bound history, apart
from the connection handling in ``anarchon.backends.sqlite.backend`` (as
``postgres/queries.py`` holds PostgreSQL's SQL). Each runs inside the caller's ``BEGIN IMMEDIATE``.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from ..base import ClaimRequest, ClaimResult, Finish
from ..claim_rules import exhausted, refusal, takeover_open
from .schema import Tables


def first(cursor: Any) -> Any:
    """The first row or ``None``, reading the cursor to its end: libSQL refuses to COMMIT
    while a statement still has rows to give."""
    rows = cursor.fetchall()
    return rows[0] if rows else None


def claim(cur: sqlite3.Cursor, t: Tables, req: ClaimRequest, now: int) -> ClaimResult:
    """Judge and write one claim inside the caller's ``BEGIN IMMEDIATE`` transaction."""

    def result(outcome: Any, attempt: int = 0) -> ClaimResult:
        return ClaimResult(outcome, attempt, now)

    row = first(cur.execute(
        f"""SELECT state, attempt, counted, handed_over, lease_until
            FROM {t.runs} WHERE job = ? AND slot = ?""",
        (req.name, req.slot),
    ))
    if req.reason == "takeover":
        return _takeover(cur, t, req, row, now)
    stored = first(cur.execute(f"SELECT version FROM {t.control} WHERE job = ?",
                               (req.name,)))
    seen = first(cur.execute(f"SELECT first_seen FROM {t.jobs} WHERE name = ?",
                             (req.name,))) if req.reason == "catch-up" else None
    why = refusal(req, None if seen is None else seen[0],
                      0 if stored is None else stored[0], now)
    if why is not None:
        return result(why)
    if row is not None:
        return result("taken")
    expired = cur.execute(
        f"""UPDATE {t.runs} SET state = 'interrupted'
            WHERE job = ? AND slot <> ? AND state = 'running' AND lease_until <= ?
            RETURNING slot, attempt""",
        (req.name, req.slot, now),
    ).fetchall()
    for slot, attempt in expired:
        end_attempt(cur, t, req.name, slot, attempt, "interrupted", None, now)
    if req.overlap == "skip" and first(cur.execute(
        f"SELECT 1 FROM {t.runs} WHERE job = ? AND slot <> ? AND state = 'running'",
        (req.name, req.slot),
    )):
        cur.execute(
            f"""INSERT INTO {t.runs} VALUES (?, ?, 'skipped', ?, 0, 0, 0, 0)""",
            (req.name, req.slot, req.owner),
        )
        return result("overlap")
    cur.execute(
        f"INSERT INTO {t.runs} VALUES (?, ?, 'running', ?, 1, 1, 0, ?)",
        (req.name, req.slot, req.owner, now + req.lease_ms),
    )
    _start_attempt(cur, t, req, 1, now)
    return result("won", 1)


def _takeover(cur: sqlite3.Cursor, t: Tables, req: ClaimRequest, row: Any, now: int
              ) -> ClaimResult:
    if row is None:
        return ClaimResult("taken", 0, now)
    state, attempt, counted, handed_over, lease_until = row
    if not takeover_open(req, state == "running", attempt, lease_until, now):
        return ClaimResult("taken", 0, now)
    end_attempt(cur, t, req.name, req.slot, attempt, "interrupted", None, now)
    if exhausted(req, counted, bool(handed_over)):
        cur.execute(
            f"UPDATE {t.runs} SET state = 'interrupted' WHERE job = ? AND slot = ?",
            (req.name, req.slot),
        )
        return ClaimResult("exhausted", 0, now)
    cur.execute(
        f"""UPDATE {t.runs} SET owner = ?, attempt = attempt + 1,
                counted = counted + ?, handed_over = 0, lease_until = ?
            WHERE job = ? AND slot = ?""",
        (req.owner, 0 if handed_over else 1, now + req.lease_ms, req.name, req.slot),
    )
    _start_attempt(cur, t, req, attempt + 1, now)
    return ClaimResult("won", attempt + 1, now)


def _start_attempt(cur: sqlite3.Cursor, t: Tables, req: ClaimRequest, attempt: int,
                   now: int) -> None:
    cur.execute(
        f"""INSERT INTO {t.attempts}
            (job, slot, attempt, instance, manual, reason, status, started_at)
            VALUES (?, ?, ?, ?, 0, ?, 'running', ?)""",
        (req.name, req.slot, attempt, req.owner, req.reason, now),
    )


def end_attempt(cur: sqlite3.Cursor, t: Tables, name: str, slot: int, attempt: int,
                status: str, error: str | None, now: int) -> None:
    """Record how a non-manual attempt ended (if it is still ``running``)."""
    cur.execute(
        f"""UPDATE {t.attempts} SET status = ?, error = ?, finished_at = ?
            WHERE job = ? AND slot = ? AND attempt = ? AND manual = 0
              AND status = 'running'""",
        (status, error, now, name, slot, attempt),
    )


def finish_run(cur: sqlite3.Cursor, t: Tables, finish: Finish, now: int) -> bool:
    """Record an attempt's outcome if ``(owner, attempt)`` still holds the run (fencing),
    bound the job's history and forget run rows older than ``retain_runs_ms``."""
    done = first(cur.execute(
        f"""UPDATE {t.runs} SET state = 'done'
            WHERE job = ? AND slot = ? AND owner = ? AND attempt = ?
              AND state = 'running' RETURNING 1""",
        (finish.name, finish.slot, finish.owner, finish.attempt),
    ))
    if done is None:
        return False
    end_attempt(cur, t, finish.name, finish.slot, finish.attempt, finish.status,
                finish.error, now)
    prune(cur, t, finish.name, finish.history_size, finish.history_ttl_ms, now)
    cur.execute(
        f"""DELETE FROM {t.runs}
            WHERE job = ? AND state <> 'running' AND slot < ?""",
        (finish.name, now - finish.retain_runs_ms),
    )
    return True


def prune(cur: sqlite3.Cursor, t: Tables, name: str, size: int, ttl_ms: int | None,
          now: int, *, skips: bool = False) -> None:
    """Bound the history of job ``name`` by count (``size``) and age (``ttl_ms``): its
    finished attempts, or (``skips``) its skip records, each on their own."""
    kind = "status = 'skipped'" if skips else "status NOT IN ('running', 'skipped')"
    cur.execute(
        f"""DELETE FROM {t.attempts} WHERE id IN (
                SELECT id FROM {t.attempts} WHERE job = ? AND {kind}
                ORDER BY started_at DESC, id DESC LIMIT -1 OFFSET ?)""",
        (name, size),
    )
    if ttl_ms is not None:
        cur.execute(
            f"""DELETE FROM {t.attempts}
                WHERE job = ? AND {kind} AND started_at < ?""",
            (name, now - ttl_ms),
        )
