"""Table layout of the SQLite backend. Names are validated identifiers, always quoted."""

from __future__ import annotations

FORMAT_VERSION = "1"


def quote(identifier: str) -> str:
    """Quote an identifier already checked by ``anarchon.names.check_table_name()``."""
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
