"""Shared values of the ``"django"`` store (``read_value`` / ``swap_value``)."""

from __future__ import annotations

from typing import Any, ClassVar

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies: ClassVar[list[tuple[str, str]]] = [
        ("anarchon_django", "0002_store_models"),
    ]

    operations: ClassVar[list[Any]] = [
        migrations.CreateModel(
            name="StoreValue",
            fields=[
                ("id", models.BigAutoField(primary_key=True, serialize=False)),
                ("job", models.CharField(max_length=200)),
                ("field", models.CharField(max_length=100)),
                ("value", models.TextField()),
            ],
            options={
                "db_table": "anarchon_django_store_value",
                "default_permissions": (),
                "constraints": [
                    models.UniqueConstraint(fields=("job", "field"),
                                            name="anarchon_store_value_key"),
                ],
            },
        ),
    ]
