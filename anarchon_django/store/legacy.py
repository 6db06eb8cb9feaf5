"""Copy the rows of the tables the old migration 0001 made (the core's SQLite or
PostgreSQL store, ``ANARCHON["OPTIONS"]["table"]``, default ``anarchon_runs``) into the
store models, so an upgrade keeps every job's history, first-seen time and open runs.

The old tables are left as they were (drop them once no old instance runs); the copy is
skipped where they do not exist, and on a database that already has store rows.
"""

from __future__ import annotations

from typing import Any

from anarchon.names import check_table_name

#: new table -> (old table suffix, new columns, old columns per vendor)
_COPIES: tuple[tuple[str, str, str, dict[str, str]], ...] = (
    ("anarchon_django_store_job", "_jobs", "name, kind, schedule, first_seen, updated",
     {"sqlite": "name, kind, schedule, first_seen, updated",
      "postgresql": "name, kind, schedule, first_seen, first_seen"}),
    ("anarchon_django_store_run", "",
     "job, slot, state, owner, attempt, counted, handed_over, lease_until",
     {"sqlite": "job, slot, state, owner, attempt, counted, handed_over, lease_until",
      "postgresql": "job, slot, status, owner, attempt, counted, handed_over, lease_until"}),
    ("anarchon_django_store_attempt", "_attempts",
     "job, slot, attempt, instance, manual, reason, status, started_at, finished_at, error",
     {vendor: "job, slot, attempt, instance, manual, reason, status, started_at, "
      "finished_at, error" for vendor in ("sqlite", "postgresql")}),
    ("anarchon_django_store_trigger", "_triggers", "job, data, requested_at",
     {vendor: "job, data, requested_at" for vendor in ("sqlite", "postgresql")}),
)


def copy_legacy_tables(apps: Any, schema_editor: Any) -> None:
    """The RunPython of migration 0002 (see the module doc)."""
    from anarchon_django.conf import SettingsError, get_settings

    connection = schema_editor.connection
    if connection.vendor not in ("sqlite", "postgresql"):
        return  # the old 0001 refused every other database
    try:
        base = str(get_settings().options.get("table", "anarchon_runs"))
    except SettingsError:
        base = "anarchon_runs"
    schema, table = check_table_name(base)
    with connection.cursor() as cursor:
        present = set(connection.introspection.table_names(cursor))
        if table + "_meta" not in present:
            return
        cursor.execute("SELECT COUNT(*) FROM anarchon_django_store_attempt")
        if cursor.fetchone()[0]:
            return
        for new, suffix, columns, old in _COPIES:
            if table + suffix not in present:
                continue
            source = connection.ops.quote_name(table + suffix)
            if schema:
                source = f"{connection.ops.quote_name(schema)}.{source}"
            cursor.execute(f"INSERT INTO {new} ({columns}) "
                           f"SELECT {old[connection.vendor]} FROM {source}")
