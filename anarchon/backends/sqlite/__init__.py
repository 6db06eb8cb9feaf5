"""SQLite backend (stdlib ``sqlite3``): leases in one ``BEGIN IMMEDIATE`` transaction."""

from .backend import SqliteBackend

__all__ = ["SqliteBackend"]
