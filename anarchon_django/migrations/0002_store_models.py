"""The store of the ``"django"`` backend as ordinary models (``sqlmigrate`` shows the
DDL), and the rows of the old 0001's tables copied into them
(``anarchon_django.store.legacy``)."""

from __future__ import annotations

from typing import Any, ClassVar

from django.db import migrations, models

from anarchon_django.store.legacy import copy_legacy_tables


class Migration(migrations.Migration):
    dependencies: ClassVar[list[tuple[str, str]]] = [
        ("anarchon_django", "0001_initial"),
    ]

    operations: ClassVar[list[Any]] = [
        migrations.CreateModel(
            name="StoreJob",
            fields=[
                ("name", models.CharField(max_length=200, primary_key=True, serialize=False)),
                ("kind", models.CharField(max_length=16)),
                ("schedule", models.TextField()),
                ("first_seen", models.BigIntegerField()),
                ("updated", models.BigIntegerField()),
            ],
            options={
                "db_table": "anarchon_django_store_job",
                "default_permissions": (),
            },
        ),
        migrations.CreateModel(
            name="StoreAttempt",
            fields=[
                ("id", models.BigAutoField(primary_key=True, serialize=False)),
                ("job", models.CharField(max_length=200)),
                ("slot", models.BigIntegerField()),
                ("attempt", models.IntegerField()),
                ("instance", models.CharField(max_length=200)),
                ("manual", models.BooleanField(default=False)),
                ("reason", models.CharField(max_length=16)),
                ("status", models.CharField(max_length=16)),
                ("started_at", models.BigIntegerField()),
                ("finished_at", models.BigIntegerField(null=True)),
                ("error", models.TextField(null=True)),
            ],
            options={
                "db_table": "anarchon_django_store_attempt",
                "default_permissions": (),
                "indexes": [
                    models.Index(fields=["job", "started_at"], name="anarchon_store_attempt_job"),
                    models.Index(fields=["started_at"], name="anarchon_store_attempt_time"),
                    models.Index(fields=["job", "slot", "attempt"],
                                 name="anarchon_store_attempt_run"),
                ],
            },
        ),
        migrations.CreateModel(
            name="StoreRun",
            fields=[
                ("id", models.BigAutoField(primary_key=True, serialize=False)),
                ("job", models.CharField(max_length=200)),
                ("slot", models.BigIntegerField()),
                ("state", models.CharField(max_length=16)),
                ("owner", models.CharField(max_length=200)),
                ("attempt", models.IntegerField()),
                ("counted", models.IntegerField()),
                ("handed_over", models.BooleanField(default=False)),
                ("lease_until", models.BigIntegerField()),
            ],
            options={
                "db_table": "anarchon_django_store_run",
                "default_permissions": (),
                "indexes": [models.Index(fields=["state", "job"], name="anarchon_store_run_state")],
                "constraints": [
                    models.UniqueConstraint(fields=("job", "slot"), name="anarchon_store_run_slot"),
                ],
            },
        ),
        migrations.CreateModel(
            name="StoreTrigger",
            fields=[
                ("id", models.BigAutoField(primary_key=True, serialize=False)),
                ("job", models.CharField(max_length=200)),
                ("data", models.TextField(null=True)),
                ("requested_at", models.BigIntegerField()),
            ],
            options={
                "db_table": "anarchon_django_store_trigger",
                "default_permissions": (),
                "indexes": [models.Index(fields=["job"], name="anarchon_store_trigger_job")],
            },
        ),
        migrations.RunPython(copy_legacy_tables, migrations.RunPython.noop, elidable=True),
    ]
