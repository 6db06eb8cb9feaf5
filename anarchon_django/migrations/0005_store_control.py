"""Runtime control in the ``"django"`` store: control records, change logs, handler
offers and the generation row (``anarchon_django.store.models``)."""

from __future__ import annotations

from typing import Any, ClassVar

from django.db import migrations, models


def first_generation(apps: Any, schema_editor: Any) -> None:
    """The generation row exists from the start, so the trigger poll reads it in its
    one query (the store also makes it again if it was deleted)."""
    generation = apps.get_model("anarchon_django", "StoreGeneration")
    generation.objects.using(schema_editor.connection.alias).bulk_create(
        [generation(id=1, value=0)], ignore_conflicts=True)


class Migration(migrations.Migration):
    dependencies: ClassVar[list[tuple[str, str]]] = [
        ("anarchon_django", "0004_runtime_control"),
    ]

    operations: ClassVar[list[Any]] = [
        migrations.CreateModel(
            name="StoreControl",
            fields=[
                ("id", models.BigAutoField(primary_key=True, serialize=False)),
                ("job", models.CharField(max_length=200, unique=True)),
                ("version", models.BigIntegerField()),
                ("record", models.TextField()),
                ("changed", models.BigIntegerField()),
            ],
            options={
                "db_table": "anarchon_django_store_control",
                "default_permissions": (),
            },
        ),
        migrations.CreateModel(
            name="StoreChange",
            fields=[
                ("id", models.BigAutoField(primary_key=True, serialize=False)),
                ("job", models.CharField(max_length=200)),
                ("changed", models.BigIntegerField()),
                ("entry", models.TextField()),
            ],
            options={
                "db_table": "anarchon_django_store_change",
                "default_permissions": (),
                "indexes": [models.Index(fields=["job", "id"],
                                         name="anarchon_store_change_job")],
            },
        ),
        migrations.CreateModel(
            name="StoreOffer",
            fields=[
                ("id", models.BigAutoField(primary_key=True, serialize=False)),
                ("instance", models.CharField(max_length=200, unique=True)),
                ("handlers", models.TextField()),
                ("seen", models.BigIntegerField()),
            ],
            options={
                "db_table": "anarchon_django_store_offer",
                "default_permissions": (),
            },
        ),
        migrations.CreateModel(
            name="StoreGeneration",
            fields=[
                ("id", models.PositiveSmallIntegerField(primary_key=True, serialize=False)),
                ("value", models.BigIntegerField()),
            ],
            options={
                "db_table": "anarchon_django_store_generation",
                "default_permissions": (),
            },
        ),
        migrations.RunPython(first_generation, migrations.RunPython.noop),
    ]
