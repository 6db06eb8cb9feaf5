"""What the parts of [`PostgresBackend`][anarchon.backends.postgres.PostgresBackend]
(values, triggers, control) use of it: its names and its sessions."""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

from psycopg import sql

from .sessions import Session


class PostgresParts(ABC):
    """The backend's plumbing, as its mixins see it (``PostgresBackend`` implements it;
    abstract, so a backend missing a part cannot be instantiated)."""

    table: str
    channel: str
    _qualified: str
    _trigger_queries: dict[str, sql.Composed]
    _control_queries: dict[str, Any]

    @abstractmethod
    def _session(self, what: str, heartbeat: bool = False
                 ) -> contextlib.AbstractAsyncContextManager[Session]:
        """A session for call ``what`` (errors translated, idempotent calls retried)."""

    @abstractmethod
    async def _fetch(self, what: str, query: Any, params: Any = None, *,
                     heartbeat: bool = False) -> list[Any]:
        """The rows of one statement, for call ``what``."""

    @abstractmethod
    async def _serialised(self, what: str, statements: Sequence[Any]) -> list[list[Any]]:
        """The rows of each statement, run in one serialised transaction."""
