"""The format version a PostgreSQL namespace records (``<table>_meta``), read on the
backend's connections or, before ``open()``, on a link of its own: a namespace of another
format, which ``open()`` refuses, is read too."""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import sql

from ...errors import StoreError
from ..capabilities import FormatStore
from ..formats import StoredFormat
from .links import Link, make_link
from .queries import FORMAT_VERSION
from .tables import Tables


class PostgresFormat(FormatStore):
    """``stored_format`` for [`PostgresBackend`][anarchon.backends.postgres.PostgresBackend]."""

    create_tables: bool
    connect_timeout: float
    table: str
    _connection: object
    _link: Link | None
    _tables: Tables

    async def stored_format(self) -> StoredFormat:
        meta = self._tables.regclass["meta"]
        link, own = self._link, None
        try:
            if link is None:
                own = link = make_link(self._connection, 1)
                await link.open(self.connect_timeout)
            async with link.session() as session:
                [(present,)] = await session.fetch(
                    sql.SQL("SELECT to_regclass(%(meta)s) IS NOT NULL"), {"meta": meta})
                rows: list[Any] = (await session.fetch(self._tables.read_version)
                                   if present else [])
            where = f"table {meta} at {link.address}"
        except psycopg.Error as exc:
            raise StoreError(f"PostgreSQL (table {self.table}): reading the format version "
                             f"failed: {exc}".strip()) from exc
        finally:
            if own is not None:
                await own.close()
        return StoredFormat(where, str(rows[0][0]) if rows else None, FORMAT_VERSION,
                            self.create_tables, "let the runs finish, then use another "
                            "table= name or migrate the tables")


__all__ = ["PostgresFormat"]
