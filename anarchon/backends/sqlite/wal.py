"""Switching a SQLite file to write-ahead logging when several processes open it at once."""

from __future__ import annotations

import sqlite3
import time

_FIRST_PAUSE_S = 0.002
_MAX_PAUSE_S = 0.05
_BUSY_CODES = (5, 6)  # SQLITE_BUSY, SQLITE_LOCKED (primary result codes)


def use_wal(connection: sqlite3.Connection, timeout: float) -> None:
    """Put the database of ``connection`` in WAL mode, retrying while it is busy.

    The switch needs an exclusive lock. When two connections race for it (processes
    opening a new file together), SQLite answers ``database is locked`` at once instead
    of calling its busy handler, since waiting could deadlock; so the busy timeout does
    not cover it and we retry here, for at most ``timeout`` seconds. WAL mode is stored
    in the file: a file already in WAL mode is left as it is, without the lock.
    """
    deadline = time.monotonic() + timeout
    pause = _FIRST_PAUSE_S
    while True:
        try:
            if _journal_mode(connection, "PRAGMA journal_mode") != "wal":
                _journal_mode(connection, "PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if not _is_busy(exc) or time.monotonic() + pause > deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, _MAX_PAUSE_S)


def _journal_mode(connection: sqlite3.Connection, statement: str) -> str:
    row = connection.execute(statement).fetchone()
    return str(row[0]).lower() if row else ""


def _is_busy(exc: sqlite3.OperationalError) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)  # Python 3.11+
    if code is not None:
        return code & 0xFF in _BUSY_CODES
    return "locked" in str(exc) or "busy" in str(exc)
