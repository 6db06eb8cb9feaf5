"""Table layout of the SQLite backend and its setup at ``open()``. Names are validated
identifiers, always quoted."""

from __future__ import annotations

import sqlite3
from typing import Any
from urllib.parse import unquote, urlsplit

from ...errors import IncompatibleStoreError
from ..urls import split_options, url_flag

FORMAT_VERSION = "1"


def quote(identifier: str) -> str:
    """Quote an identifier already checked by ``anarchon.jobs.name_checks.check_table_name()``."""
    return '"' + identifier.replace('"', '""') + '"'


class Tables:
    """Quoted names of the four tables that belong to one ``table`` option."""

    def __init__(self, table: str) -> None:
        self.base = table
        self.runs = quote(table)
        self.attempts = quote(table + "_attempts")
        self.jobs = quote(table + "_jobs")
        self.meta = quote(table + "_meta")
        self.triggers = quote(table + "_triggers")
        self.control = quote(table + "_control")
        self.changes = quote(table + "_changes")
        self.offers = quote(table + "_offers")

    def control_statements(self) -> list[str]:
        """The runtime-control tables, added to a file of any anarchon version (the format
        version stays: older anarchons ignore them)."""
        b = self.base
        return [
            f"""CREATE TABLE IF NOT EXISTS {self.control} (
                job TEXT PRIMARY KEY, version INTEGER NOT NULL, record TEXT NOT NULL,
                changed INTEGER NOT NULL) WITHOUT ROWID""",
            f"""CREATE TABLE IF NOT EXISTS {self.changes} (
                id INTEGER PRIMARY KEY AUTOINCREMENT, job TEXT NOT NULL,
                changed INTEGER NOT NULL, entry TEXT NOT NULL)""",
            f"""CREATE INDEX IF NOT EXISTS {quote(b + '_changes_job')}
                ON {self.changes} (job, id)""",
            f"""CREATE TABLE IF NOT EXISTS {self.offers} (
                instance TEXT PRIMARY KEY, handlers TEXT NOT NULL,
                seen INTEGER NOT NULL) WITHOUT ROWID""",
        ]

    def values_statement(self) -> str:
        """The shared-values table (made on first use when tables may be created)."""
        return f"""CREATE TABLE IF NOT EXISTS {quote(self.base + '_values')} (
                job TEXT NOT NULL, field TEXT NOT NULL, value TEXT NOT NULL,
                PRIMARY KEY (job, field)) WITHOUT ROWID"""

    def instances_statement(self) -> str:
        """The liveness records' table (made on first use when tables may be created)."""
        return f"""CREATE TABLE IF NOT EXISTS {quote(self.base + '_instances')} (
                id TEXT PRIMARY KEY, record TEXT NOT NULL, last_seen INTEGER NOT NULL,
                expires INTEGER NOT NULL) WITHOUT ROWID"""

    def names(self) -> list[str]:
        """Every table of the namespace, unquoted."""
        return [self.base + suffix for suffix in (
            "", "_attempts", "_jobs", "_meta", "_triggers", "_control", "_changes", "_offers",
            "_values")]

    def ddl(self) -> str:
        """The statements that create the tables of a new namespace, each ending in ``;``."""
        statements = (self.create_statements() + self.control_statements()
                      + [self.values_statement(), self.instances_statement()])
        return "".join(f"{statement};\n" for statement in statements)

    def create_statements(self) -> list[str]:
        b = self.base
        return [
            f"""CREATE TABLE {self.meta} (
                key TEXT PRIMARY KEY, value TEXT NOT NULL)""",
            f"""CREATE TABLE {self.runs} (
                job TEXT NOT NULL, slot INTEGER NOT NULL,
                state TEXT NOT NULL,            -- running | done | skipped | interrupted
                owner TEXT NOT NULL, attempt INTEGER NOT NULL,
                counted INTEGER NOT NULL,       -- attempts that count toward max_attempts
                handed_over INTEGER NOT NULL DEFAULT 0,
                lease_until INTEGER NOT NULL,   -- store clock, epoch ms
                PRIMARY KEY (job, slot)) WITHOUT ROWID""",
            f"CREATE INDEX {quote(b + '_state')} ON {self.runs} (state, job)",
            f"""CREATE TABLE {self.attempts} (
                id INTEGER PRIMARY KEY AUTOINCREMENT,
                job TEXT NOT NULL, slot INTEGER NOT NULL, attempt INTEGER NOT NULL,
                instance TEXT NOT NULL, manual INTEGER NOT NULL, reason TEXT NOT NULL,
                status TEXT NOT NULL, started_at INTEGER NOT NULL, finished_at INTEGER,
                error TEXT)""",
            f"CREATE INDEX {quote(b + '_attempts_job')} ON {self.attempts} (job, started_at)",
            f"""CREATE UNIQUE INDEX {quote(b + '_attempts_run')}
                ON {self.attempts} (job, slot, attempt) WHERE manual = 0""",
            f"""CREATE TABLE {self.jobs} (
                name TEXT PRIMARY KEY, kind TEXT NOT NULL, schedule TEXT NOT NULL,
                first_seen INTEGER NOT NULL, updated INTEGER NOT NULL)""",
            f"""CREATE TABLE {self.triggers} (
                id INTEGER PRIMARY KEY AUTOINCREMENT, job TEXT NOT NULL, data TEXT,
                requested_at INTEGER NOT NULL)""",
            f"INSERT INTO {self.meta} (key, value) VALUES ('format_version', '{FORMAT_VERSION}')",
        ]


def prepare(cur: sqlite3.Cursor, tables: Tables, database: str, create: bool) -> None:
    """Inside a write transaction: create a new namespace's tables (the runtime-control
    tables of an older one), or check an existing one's format; with ``create`` off,
    create nothing and refuse a namespace that misses a table."""
    t = tables
    present = {
        row[0] for row in cur.execute(
            "SELECT name FROM sqlite_master WHERE type='table' AND name IN "
            f"({','.join('?' * len(t.names()))})", t.names()).fetchall()
    }
    core = {t.base, t.base + "_attempts", t.base + "_jobs", t.base + "_meta",
            t.base + "_triggers"}
    if not create:
        missing = [name for name in t.names() if name not in present]
        if missing:
            raise IncompatibleStoreError(
                f"create_tables is off and {database} lacks the table(s) "
                f"{', '.join(missing)}: create them first (`anarchon schema --backend URL` "
                "prints the statements), or let anarchon create them")
    elif not present & core:
        for statement in t.create_statements() + t.control_statements():
            cur.execute(statement)
        return
    if t.base + "_meta" not in present:
        raise IncompatibleStoreError(
            f"table {t.base!r} in {database} exists but was not created by "
            "anarchon (no meta table); choose another table= name"
        )
    rows = cur.execute(f"SELECT value FROM {t.meta} WHERE key='format_version'").fetchall()
    if not rows or rows[0][0] != FORMAT_VERSION or not core <= present:
        found = rows[0][0] if rows else "none"
        raise IncompatibleStoreError(
            f"table {t.base!r} in {database} has format version {found}, this "
            f"anarchon needs {FORMAT_VERSION}; nothing was changed"
        )
    if create:
        for statement in t.control_statements():
            cur.execute(statement)


def read_format(cur: sqlite3.Cursor, tables: Tables) -> str | None:
    """The format version the namespace records (``None``: no meta table, or no row)."""
    if not cur.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?",
                       (tables.base + "_meta",)).fetchall():
        return None
    rows = cur.execute(f"SELECT value FROM {tables.meta} WHERE key='format_version'"
                       ).fetchall()
    return str(rows[0][0]) if rows else None


def purge(cur: sqlite3.Cursor, tables: Tables) -> int:
    """Inside a write transaction: empty the namespace (the tables and their format
    version stay), its shared values included; how many rows went."""
    removed = 0
    for table in (tables.attempts, tables.runs, tables.triggers, tables.jobs,
                  tables.control, tables.changes, tables.offers):
        removed += cur.execute(f"DELETE FROM {table}").rowcount
    cur.execute(f"DELETE FROM {tables.meta} WHERE key = 'control_generation'")
    if cur.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?",
                   (tables.base + "_values",)).fetchall():  # made on first use
        removed += cur.execute(f"DELETE FROM {quote(tables.base + '_values')}").rowcount
    return removed


def parse_url(url: str, options: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The file and the keyword options of a ``sqlite:`` URL (``options`` win);
    ``sqlite:/x.db`` (one slash) is refused: it reads as absolute but would not be."""
    parts = urlsplit(url)
    path = unquote(parts.path)
    path = path[1:] if path.startswith("/") else path
    if parts.netloc or not url[len(parts.scheme) + 1:].startswith("//"):
        raise ValueError(f"invalid SQLite URL {url!r}: use sqlite:///relative/file.db "
                         "(three slashes) or sqlite:////absolute/file.db (four)")
    unknown: list[str] = []
    _, ours = split_options(url, ("table", "busy_timeout", "create"), check=unknown.append)
    if unknown:
        raise ValueError(f"unknown SQLite URL option(s) {sorted(unknown)} in {url!r}")
    query: dict[str, Any] = {**ours, **options}
    if "create" in ours and "create_tables" not in options:
        query["create_tables"] = url_flag("create", query.pop("create"))
    query.pop("create", None)
    return path, query


def is_libsql(value: object) -> bool:
    """A libSQL (libsql-python) connection or error; its API follows ``sqlite3``."""
    try:
        import libsql  # type: ignore[import-not-found, import-untyped, unused-ignore]
    except ImportError:
        return False
    return isinstance(value, (libsql.Connection, libsql.Error))
