"""A registered job's kind holds the framework that declared it (``celery:cron``,
``dramatiq:every``; ``anarchon.backends.frameworks``): the column grows from 16 to 64
characters. Rows written before keep their plain kind and read as plain jobs."""

from __future__ import annotations

from typing import Any, ClassVar

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies: ClassVar[list[tuple[str, str]]] = [
        ("anarchon_django", "0005_store_control"),
    ]

    operations: ClassVar[list[Any]] = [
        migrations.AlterField(
            model_name="storejob",
            name="kind",
            field=models.CharField(max_length=64),
        ),
    ]
