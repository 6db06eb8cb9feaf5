"""What the parts of [`SqliteBackend`][anarchon.backends.sqlite.SqliteBackend] (control,
triggers, values) use of it: its tables, its thread and its write transactions."""

from __future__ import annotations

import sqlite3
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import TypeVar

from ..base import HeartbeatResult, HeldRun, RunKey
from ..trigger_rules import TriggerRequest
from .schema import Tables

T = TypeVar("T")


class SqliteParts(ABC):
    """The backend's plumbing, as its mixins see it (``SqliteBackend`` implements it;
    abstract, so a backend missing a part cannot be instantiated)."""

    _tables: Tables

    @abstractmethod
    async def _call(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn`` on the backend's thread, with its connection."""

    @abstractmethod
    def _write(self, connection: sqlite3.Connection
               ) -> AbstractContextManager[sqlite3.Cursor]:
        """A write transaction (``BEGIN IMMEDIATE``) on ``connection``."""

    @abstractmethod
    def _now(self) -> int:
        """The store clock (epoch ms)."""

    @abstractmethod
    def _take(self, connection: sqlite3.Connection, names: Sequence[str]
              ) -> list[TriggerRequest]:
        """Take the live trigger requests of ``names`` (in a transaction of its own)."""

    @abstractmethod
    def _renew(self, cur: sqlite3.Cursor, owner: str, held: Sequence[HeldRun],
               watched: Sequence[RunKey], lease_ms: int, now: int) -> HeartbeatResult:
        """The heartbeat's statements, in the caller's write transaction."""
