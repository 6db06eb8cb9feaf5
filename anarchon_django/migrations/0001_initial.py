"""The app's whole schema, in one migration (``manage.py sqlmigrate anarchon_django 0001``
shows the DDL).

* ``Job``, ``Run``, ``DynamicJob`` and ``Instance`` are unmanaged models without tables:
  they carry the admin pages' permissions (``view_job``, ``run_job``, ``change_job``, the
  dynamic jobs' ``add``/``change``/``delete``/``view_dynamicjob``, ``view_instance``).
* The ``Store*`` models are the store of the ``"django"`` backend
  (``anarchon_django.store.models``): jobs, runs and their leases, attempts (history),
  manual-run requests, shared values, the instances' liveness records, and for runtime
  control the control records, their change log, handler offers and the one-row
  generation, which exists from the start (the store also makes it again if it was
  deleted).
"""

from __future__ import annotations

from typing import Any, ClassVar

from django.db import migrations, models


def first_generation(apps: Any, schema_editor: Any) -> None:
    """The generation row exists from the start, so the trigger poll reads it in its
    one query (the store also makes it again if it was deleted)."""
    generation = apps.get_model("anarchon_django", "StoreGeneration")
    generation.objects.using(schema_editor.connection.alias).bulk_create(
        [generation(id=1, value=0)], ignore_conflicts=True)


def _permissions_only(name: str, table: str, **options: Any) -> migrations.CreateModel:
    """An unmanaged model without a table, only there for its permissions."""
    return migrations.CreateModel(
        name=name,
        fields=[("id", models.AutoField(
            auto_created=True, primary_key=True, serialize=False, verbose_name="ID"))],
        options={"db_table": table, "managed": False, **options},
    )


class Migration(migrations.Migration):
    initial = True
    dependencies: ClassVar[list[tuple[str, str]]] = []

    operations: ClassVar[list[Any]] = [
        _permissions_only(
            "Job", "anarchon_django_job_unmanaged",
            verbose_name="job", verbose_name_plural="jobs", default_permissions=("view",),
            permissions=(("run_job", "Can request a manual run (Run now)"),
                         ("change_job", "Can pause, resume and reschedule jobs"))),
        _permissions_only(
            "Run", "anarchon_django_run_unmanaged",
            verbose_name="run", verbose_name_plural="run history",
            default_permissions=("view",)),
        _permissions_only(
            "DynamicJob", "anarchon_django_dynamicjob_unmanaged",
            verbose_name="dynamic job", verbose_name_plural="dynamic jobs"),
        _permissions_only(
            "Instance", "anarchon_django_instance_unmanaged",
            verbose_name="instance", verbose_name_plural="instances",
            default_permissions=("view",)),
        migrations.CreateModel(
            name="StoreJob",
            fields=[
                ("name", models.CharField(max_length=200, primary_key=True, serialize=False)),
                ("kind", models.CharField(max_length=64)),
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
            name="StoreInstance",
            fields=[
                ("id", models.BigAutoField(primary_key=True, serialize=False)),
                ("instance", models.CharField(max_length=200, unique=True)),
                ("record", models.TextField()),
                ("last_seen", models.BigIntegerField()),
                ("expires", models.BigIntegerField()),
            ],
            options={
                "db_table": "anarchon_django_store_instance",
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
