"""Permissions for the admin pages.

Until 0002 this migration also had the core's SQLite or PostgreSQL backend create its own
tables (``anarchon_runs`` …); 0002 replaces them with ordinary models and copies their
rows, so databases that applied the old 0001 upgrade in place.
"""

from __future__ import annotations

from typing import Any, ClassVar

from django.db import migrations, models


class Migration(migrations.Migration):
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
    ]
