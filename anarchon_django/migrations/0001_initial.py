"""Permissions for the admin pages, and the store tables of the ``"django"`` backend.

The tables are created by the backend's own ``open()`` (``CREATE TABLE`` + format
version), the same code every ``manage.py anarchon run`` runs on start, so ``migrate``
and ``run`` can never disagree about the layout. Reversing leaves them in place.
"""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar

from django.db import migrations, models


def create_store_tables(apps: Any, schema_editor: Any) -> None:
    from anarchon_django.backend import django_backend
    from anarchon_django.conf import get_settings

    config = get_settings()
    alias = schema_editor.connection.alias
    if config.backend != "django" or config.options.get("database", "default") != alias:
        return
    backend = django_backend(**config.options)

    async def open_and_close() -> None:
        await backend.open()
        await backend.close()

    asyncio.run(open_and_close())


class Migration(migrations.Migration):
    # the backend opens its own connection: no migration transaction may hold a lock
    atomic = False
    initial = True
    dependencies: ClassVar[list[tuple[str, str]]] = []

    operations: ClassVar[list[Any]] = [
        migrations.CreateModel(
            name="Job",
            fields=[("id", models.AutoField(
                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"))],
            options={
                "verbose_name": "job",
                "verbose_name_plural": "jobs",
                "db_table": "anarchon_django_job_unmanaged",
                "managed": False,
                "default_permissions": ("view",),
                "permissions": (("run_job", "Can request a manual run (Run now)"),),
            },
        ),
        migrations.CreateModel(
            name="Run",
            fields=[("id", models.AutoField(
                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"))],
            options={
                "verbose_name": "run",
                "verbose_name_plural": "run history",
                "db_table": "anarchon_django_run_unmanaged",
                "managed": False,
                "default_permissions": ("view",),
            },
        ),
        migrations.RunPython(create_store_tables, migrations.RunPython.noop, elidable=False),
    ]
