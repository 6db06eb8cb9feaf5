"""The format version a store's namespace records, read back for ``anarchon doctor``.

Every lease store records the layout its keys or tables were made with: SQLite and
PostgreSQL in the namespace's ``<table>_meta`` table (``format_version``), Redis and Valkey
in the field ``""`` of the ``<prefix>jobs`` hash, the Django store as the applied
migrations of ``anarchon_django``. An instance of another format refuses the store
(``IncompatibleStoreError``); `StoredFormat` says which format is there before anything
is opened or created.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class StoredFormat:
    """What a namespace records and what this anarchon needs."""

    #: what holds the version (a table, a hash, the migrations of a database)
    where: str
    #: the recorded version; ``None``: none recorded
    stored: str | None
    #: the version this code reads and writes
    expected: str
    #: a namespace with nothing recorded is made by the first instance (``False``: it must
    #: be made first: Django's migrations, ``create_tables`` off)
    created_on_use: bool
    #: what to do when the versions differ
    remedy: str = ""

    @property
    def usable(self) -> bool:
        """Whether an instance of this anarchon can use the namespace."""
        return self.stored == self.expected or (self.stored is None and self.created_on_use)


__all__ = ["StoredFormat"]
