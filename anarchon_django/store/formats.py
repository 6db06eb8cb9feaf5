"""The Django store's format: the migrations of ``anarchon_django`` applied to its
database alias (the latest applied) against the latest this code ships."""

from __future__ import annotations

from django.db import connections
from django.db.migrations.loader import MigrationLoader

from anarchon.backends.capabilities import FormatStore
from anarchon.backends.formats import StoredFormat

from .worker import OrmThread

APP = "anarchon_django"


class DjangoFormat(FormatStore):
    """``stored_format`` for [`DjangoBackend`][anarchon_django.store.backend.DjangoBackend]."""

    alias: str
    _thread: OrmThread

    async def stored_format(self) -> StoredFormat:
        stored, expected = await self._thread.call(self._migrations)
        return StoredFormat(
            f"the migrations of {APP} on database {self.alias!r}", stored, expected, False,
            f"run 'python manage.py migrate {APP} --database {self.alias}' with this "
            "anarchon_django")

    def _migrations(self) -> tuple[str | None, str]:
        """The latest migration applied (``None``: none) and the latest there is."""
        loader = MigrationLoader(connections[self.alias], ignore_no_migrations=True)
        applied = sorted(name for app, name in loader.applied_migrations if app == APP)
        leaves = sorted(name for app, name in loader.graph.leaf_nodes(APP) if app == APP)
        return (applied[-1] if applied else None), leaves[-1]


__all__ = ["DjangoFormat"]
