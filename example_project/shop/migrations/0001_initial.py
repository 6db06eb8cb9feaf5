"""The Tick table."""

from __future__ import annotations

from typing import Any, ClassVar

from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True
    dependencies: ClassVar[list[Any]] = []
    operations: ClassVar[list[Any]] = [
        migrations.CreateModel(
            name="Tick",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True,
                                           serialize=False, verbose_name="ID")),
                ("slot", models.BigIntegerField(unique=True)),
                ("instance", models.CharField(max_length=200)),
                ("attempt", models.PositiveIntegerField(default=1)),
                ("created", models.DateTimeField(auto_now_add=True)),
            ],
        ),
    ]
