"""A PostgreSQL namespace's tables at ``open()``: check the format version, create what is
missing (the core tables of a new namespace, a table dropped by hand, the trigger and
runtime-control tables an older anarchon did not make), refuse foreign tables.

With ``create_tables=False`` nothing is created or altered (a role with only read/write
rights): every table must exist, made from :meth:`Tables.ddl` (``anarchon schema``)."""

from __future__ import annotations

from collections.abc import Callable

import psycopg
from psycopg import sql

from ...errors import IncompatibleStoreError
from .control import CREATE as CREATE_CONTROL
from .links import Session
from .liveness import CREATE_INSTANCES
from .queries import (
    ADD_REGISTERED,
    CREATE,
    CREATE_SCHEMA,
    EXISTING,
    FORMAT_VERSION,
    READ_VERSION,
    SCHEMA_EXISTS,
    SETUP_LOCK,
)
from .values import CREATE_VALUES


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
                                ("changes", "_changes"), ("offers", "_offers"),
                                ("triggers", "_triggers"), ("values", "_values"))
        }
        self.base = base
        self.create = [q(text) for text in CREATE]
        # no parameters: the statements go as one query, in one round trip
        self.control = [q(text) for text in CREATE_CONTROL]
        self.create_control = sql.SQL("; ").join(self.control)
        self.read_version = q(READ_VERSION)
        self.add_registered = q(ADD_REGISTERED)

    def ddl(self) -> str:
        """The statements that create this namespace's tables (for a DBA to run as the
        tables' owner), each ending in ``;``; running them twice changes nothing."""
        statements: list[sql.Composable] = []
        if self.schema is not None:
            statements.append(sql.SQL(CREATE_SCHEMA).format(
                schema=sql.Identifier(self.schema)))
        statements += self.create[:-1]
        statements.append(sql.SQL(
            "INSERT INTO {meta} (key, value) VALUES ('format_version', {version}) "
            "ON CONFLICT (key) DO NOTHING").format(
                meta=self._ident("_meta"),
                version=sql.Literal(FORMAT_VERSION)))
        statements += self.control
        statements.append(sql.SQL(CREATE_VALUES).format(values=self._ident("_values")))
        statements.append(sql.SQL(CREATE_INSTANCES).format(
            instances=self._ident("_instances")))
        return "".join(f"{statement.as_string(None)};\n" for statement in statements)

    def _ident(self, suffix: str) -> sql.Identifier:
        name = self.base + suffix
        return sql.Identifier(self.schema, name) if self.schema else sql.Identifier(name)

    async def check(self, session: Session, address: str) -> None:
        """Without creating anything: every table exists with this format version."""
        keys = list(self.regclass)
        [present] = await session.fetch(sql.SQL("SELECT " + ", ".join(
            f"to_regclass(%({key})s) IS NOT NULL" for key in keys)), self.regclass)
        missing = [self.regclass[key]
                   for key, there in zip(keys, present, strict=True) if not there]
        if missing:
            raise IncompatibleStoreError(
                f"create_tables is off and {address} lacks {', '.join(missing)}: have "
                "them created by a role that may (`anarchon schema --backend URL` prints "
                "the statements), or let anarchon create them")
        [(registered,)] = await session.fetch(sql.SQL(
            "SELECT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = "
            "to_regclass(%(jobs)s) AND attname = 'registered' AND NOT attisdropped)"),
            {"jobs": self.regclass["jobs"]})
        if not registered:
            raise IncompatibleStoreError(
                f"create_tables is off and {self.regclass['jobs']} at {address} lacks the "
                "registered column (made by an older anarchon): run `ALTER TABLE "
                f"{self.regclass['jobs']} ADD COLUMN registered bigint` as its owner")
        await self._version(session, address)

    async def setup(self, session: Session, address: str) -> None:
        """Inside the caller's transaction: create or check every table."""
        # Several instances may start at once: the transaction-scoped advisory lock makes
        # the check-then-create atomic (CREATE ... IF NOT EXISTS alone can still race on
        # the catalog's unique indexes).
        await session.fetch(sql.SQL(SETUP_LOCK), {"table": self.qualified})
        if self.schema is not None:
            [(exists,)] = await session.fetch(sql.SQL(SCHEMA_EXISTS),
                                              {"schema": self.schema})
            if not exists:
                await session.fetch(sql.SQL(CREATE_SCHEMA).format(
                    schema=sql.Identifier(self.schema)))
        [present] = await session.fetch(sql.SQL(EXISTING), self.regclass)
        await self._core(session, address, *(bool(v) for v in present[:4]))
        if not present[4]:  # runtime control joins a namespace of any anarchon (same format)
            await session.fetch(self.create_control)
        if not present[5]:  # checked first: ALTER TABLE locks the table even when a no-op
            await session.fetch(self.add_registered)

    async def _core(self, session: Session, address: str, runs: bool, attempts: bool,
                    jobs: bool, meta: bool) -> None:
        if meta:
            await self._version(session, address)
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
            await session.fetch(statement, {"version": FORMAT_VERSION}
                                if statement is self.create[-1] else None)


    async def _version(self, session: Session, address: str) -> None:
        try:
            rows = await session.fetch(self.read_version)
        except psycopg.Error as exc:
            raise IncompatibleStoreError(
                f"{self.regclass['meta']} at {address} exists but is not an "
                f"anarchon format table ({exc}); choose another table= value") from exc
        version = rows[0][0] if rows else None
        if version != FORMAT_VERSION:
            raise IncompatibleStoreError(
                f"{self.regclass['meta']} at {address} holds anarchon format "
                f"{version!r}, this version needs {FORMAT_VERSION!r}; nothing was "
                "changed. Use another table= value or migrate the tables")


__all__ = ["Tables"]
