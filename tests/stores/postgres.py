"""PostgreSQL: ``ANARCHON_POSTGRES_URL`` (from ``scripts/servers.py``).

Each namespace becomes its own ``table`` (schema-qualified when
``ANARCHON_POSTGRES_SCHEMA`` is set), so tests share one database without seeing each
other's jobs.
"""

from __future__ import annotations

import hashlib
import os
import re

from . import StoreSpec, not_set

BASE_URL = os.environ.get("ANARCHON_POSTGRES_URL") or ""
SCHEMA = os.environ.get("ANARCHON_POSTGRES_SCHEMA") or ""


def table_for(namespace: str) -> str:
    """A valid, unique table name for ``namespace`` (at most 48 characters)."""
    name = "t_" + re.sub(r"[^A-Za-z0-9_]", "_", namespace)
    if len(name) > 48:
        digest = hashlib.sha1(namespace.encode()).hexdigest()[:10]
        name = f"{name[:37]}_{digest}"
    return f"{SCHEMA}.{name}" if SCHEMA else name


def _url(namespace: str) -> str:
    separator = "&" if "?" in BASE_URL else "?"
    return f"{BASE_URL}{separator}table={table_for(namespace)}"


def _unavailable() -> str | None:
    if not BASE_URL:
        return not_set("ANARCHON_POSTGRES_URL")
    try:
        import psycopg
    except ImportError:
        return 'psycopg is not installed (pip install "anarchon[postgres]")'
    try:
        with psycopg.connect(BASE_URL, connect_timeout=2, autocommit=True) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as exc:
        # the message names the variable, not its value (which may hold a password)
        return f"PostgreSQL at ANARCHON_POSTGRES_URL does not answer: {exc}"
    return None


def _purge(namespaces: set[str]) -> None:
    """Drop the tables of ``namespaces`` (the backend's table and its ``_…`` siblings)."""
    import psycopg
    from psycopg import sql

    bases = [table_for(namespace).rsplit(".", 1)[-1] for namespace in namespaces]
    with psycopg.connect(BASE_URL, autocommit=True) as conn:
        current = conn.execute("SELECT current_schema()").fetchone()
        schema = SCHEMA or str(current[0] if current else "public")
        tables = [str(row[0]) for row in conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = %s", [schema])]
        for table in tables:
            if any(table == base or table.startswith(base + "_") for base in bases):
                conn.execute(sql.SQL("DROP TABLE IF EXISTS {} CASCADE").format(
                    sql.Identifier(schema, table)))


STORE = StoreSpec(id="postgres", make_url=_url, lease=True, unavailable=_unavailable,
                  purge=_purge)
