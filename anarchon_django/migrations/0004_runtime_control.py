"""Permissions for runtime control: ``change_job`` (pause, resume, reschedule) and the
dynamic jobs' admin (``add``/``change``/``delete``/``view_dynamicjob``)."""

from __future__ import annotations

from typing import Any, ClassVar

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies: ClassVar[list[tuple[str, str]]] = [
        ("anarchon_django", "0003_store_values"),
    ]

    operations: ClassVar[list[Any]] = [
        migrations.AlterModelOptions(
            name="job",
            options={
                "verbose_name": "job",
                "verbose_name_plural": "jobs",
                "managed": False,
                "default_permissions": ("view",),
                "permissions": (("run_job", "Can request a manual run (Run now)"),
                                ("change_job", "Can pause, resume and reschedule jobs")),
            },
        ),
        migrations.CreateModel(
            name="DynamicJob",
            fields=[("id", models.AutoField(
                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"))],
            options={
                "verbose_name": "dynamic job",
                "verbose_name_plural": "dynamic jobs",
                "db_table": "anarchon_django_dynamicjob_unmanaged",
                "managed": False,
            },
        ),
    ]
