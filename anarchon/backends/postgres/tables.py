"""A PostgreSQL namespace's tables at ``open()``: check the format version, create what is
missing (the core tables of a new namespace, a table dropped by hand, the trigger and
runtime-control tables an older anarchon did not make), refuse foreign tables."""

from __future__ import annotations

from collections.abc import Callable

import psycopg
from psycopg import sql

from ...errors import IncompatibleStoreError
from . import control, queries
from .links import Session


class Tables:
    """The setup statements of one namespace (``schema.base``; ``qualified`` is its
    quoted text form, used for ``to_regclass()`` and the setup lock's key)."""

    def __init__(self, schema: str | None, base: str, qualified: str,
                 q: Callable[[str], sql.Composed]) -> None:
        self.schema = schema
        self.qualified = qualified
        self.regclass = {
            key: (f'"{schema}".' if schema else "") + f'"{base}{suffix}"'
            for key, suffix in (("runs", ""), ("attempts", "_attempts"), ("jobs", "_jobs"),
                                ("meta", "_meta"), ("control", "_control"),
                                ("changes", "_changes"), ("offers", "_offers"))
        }
        self.create = [q(text) for text in queries.CREATE]
        # no parameters: the statements go as one query, in one round trip
        self.create_control = sql.SQL("; ").join(q(text) for text in control.CREATE)
        self.read_version = q(queries.READ_VERSION)
        self.add_registered = q(queries.ADD_REGISTERED)

    async def setup(self, session: Session, address: str) -> None:
        """Inside the caller's transaction: create or check every table."""
        # Several instances may start at once: the transaction-scoped advisory lock makes
        # the check-then-create atomic (CREATE ... IF NOT EXISTS alone can still race on
        # the catalog's unique indexes).
        await session.fetch(sql.SQL(queries.SETUP_LOCK), {"table": self.qualified})
        if self.schema is not None:
            [(exists,)] = await session.fetch(sql.SQL(queries.SCHEMA_EXISTS),
                                              {"schema": self.schema})
            if not exists:
                await session.fetch(sql.SQL(queries.CREATE_SCHEMA).format(
                    schema=sql.Identifier(self.schema)))
        [present] = await session.fetch(sql.SQL(queries.EXISTING), self.regclass)
        await self._core(session, address, *(bool(v) for v in present[:4]))
        if not present[4]:  # runtime control joins a namespace of any anarchon (same format)
            await session.fetch(self.create_control)
        if not present[5]:  # checked first: ALTER TABLE locks the table even when a no-op
            await session.fetch(self.add_registered)

    async def _core(self, session: Session, address: str, runs: bool, attempts: bool,
                    jobs: bool, meta: bool) -> None:
        if meta:
            try:
                rows = await session.fetch(self.read_version)
            except psycopg.Error as exc:
                raise IncompatibleStoreError(
                    f"{self.regclass['meta']} at {address} exists but is not an "
                    f"anarchon format table ({exc}); choose another table= value") from exc
            version = rows[0][0] if rows else None
            if version != queries.FORMAT_VERSION:
                raise IncompatibleStoreError(
                    f"{self.regclass['meta']} at {address} holds anarchon format "
                    f"{version!r}, this version needs {queries.FORMAT_VERSION!r}; nothing was "
                    "changed. Use another table= value or migrate the tables")
            if runs and attempts and jobs:
                await session.fetch(self.create[-2])  # triggers (IF NOT EXISTS)
                return
            # a table was dropped by hand: recreate it (IF NOT EXISTS keeps the others)
            for statement in self.create[:-1]:
                await session.fetch(statement)
            return
        if runs or attempts or jobs:
            raise IncompatibleStoreError(
                f"tables named after {self.qualified} exist at {address} without an "
                f"anarchon {self.regclass['meta']} table; nothing was changed. Choose "
                "another table= value")
        for statement in self.create:
            await session.fetch(statement, {"version": queries.FORMAT_VERSION}
                                if statement is self.create[-1] else None)


__all__ = ["Tables"]
