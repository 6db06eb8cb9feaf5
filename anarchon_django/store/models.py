"""The store of the ``"django"`` backend: ten ordinary models in the project's database.

Times are integers, epoch milliseconds of the *database's* clock (see
``anarchon_django.store.clock``), exactly as the core's other stores keep them, so a
slot compares with ``lease_until`` without time-zone or precision conversions on any
database. ``sqlmigrate anarchon_django 0001`` shows the DDL.
"""

from __future__ import annotations

from django.db import models

#: longest job name, instance id and reason the store keeps (MySQL indexes need a bound)
NAME_LENGTH = 200
#: longest stored kind: a framework name, ``:`` and the schedule kind
KIND_LENGTH = 64


class StoreJob(models.Model):
    """A job some instance registered: the first-seen time gates catch-up."""

    name: models.CharField[str, str] = models.CharField(max_length=NAME_LENGTH, primary_key=True)
    #: the schedule kind, ``<framework>:<kind>`` for a framework's job
    #: (``anarchon.backends.frameworks``)
    kind: models.CharField[str, str] = models.CharField(max_length=KIND_LENGTH)
    schedule: models.TextField[str, str] = models.TextField()
    first_seen: models.BigIntegerField[int, int] = models.BigIntegerField()
    updated: models.BigIntegerField[int, int] = models.BigIntegerField()

    class Meta:
        db_table = "anarchon_django_store_job"
        default_permissions = ()

    def __str__(self) -> str:
        return str(self.name)


class StoreRun(models.Model):
    """One scheduled run (job, slot) and its lease: the row claims compete for."""

    id: models.BigAutoField[int, int] = models.BigAutoField(primary_key=True)
    job: models.CharField[str, str] = models.CharField(max_length=NAME_LENGTH)
    slot: models.BigIntegerField[int, int] = models.BigIntegerField()
    #: running | done | skipped | interrupted
    state: models.CharField[str, str] = models.CharField(max_length=16)
    owner: models.CharField[str, str] = models.CharField(max_length=NAME_LENGTH)
    attempt: models.IntegerField[int, int] = models.IntegerField()
    #: attempts that count towards max_attempts (a hand-over does not)
    counted: models.IntegerField[int, int] = models.IntegerField()
    handed_over: models.BooleanField[bool, bool] = models.BooleanField(default=False)
    lease_until: models.BigIntegerField[int, int] = models.BigIntegerField()

    class Meta:
        db_table = "anarchon_django_store_run"
        default_permissions = ()
        constraints = (
            models.UniqueConstraint(fields=("job", "slot"), name="anarchon_store_run_slot"),
        )
        indexes = (models.Index(fields=("state", "job"), name="anarchon_store_run_state"),)

    def __str__(self) -> str:
        return f"{self.job}@{self.slot}"


class StoreAttempt(models.Model):
    """One attempt of a run (or a manual run): the history the admin pages show."""

    id: models.BigAutoField[int, int] = models.BigAutoField(primary_key=True)
    job: models.CharField[str, str] = models.CharField(max_length=NAME_LENGTH)
    slot: models.BigIntegerField[int, int] = models.BigIntegerField()
    attempt: models.IntegerField[int, int] = models.IntegerField()
    instance: models.CharField[str, str] = models.CharField(max_length=NAME_LENGTH)
    manual: models.BooleanField[bool, bool] = models.BooleanField(default=False)
    reason: models.CharField[str, str] = models.CharField(max_length=16)
    #: running | success | failure | interrupted | skipped ...
    status: models.CharField[str, str] = models.CharField(max_length=16)
    started_at: models.BigIntegerField[int, int] = models.BigIntegerField()
    finished_at: models.BigIntegerField[int | None, int | None] = models.BigIntegerField(null=True)
    error: models.TextField[str | None, str | None] = models.TextField(null=True)

    class Meta:
        db_table = "anarchon_django_store_attempt"
        default_permissions = ()
        indexes = (
            models.Index(fields=("job", "started_at"), name="anarchon_store_attempt_job"),
            models.Index(fields=("started_at",), name="anarchon_store_attempt_time"),
            models.Index(fields=("job", "slot", "attempt"), name="anarchon_store_attempt_run"),
        )

    def __str__(self) -> str:
        return f"{self.job}@{self.slot}#{self.attempt}"


class StoreTrigger(models.Model):
    """A pending manual-run request (``trigger()``, the admin's Run now)."""

    id: models.BigAutoField[int, int] = models.BigAutoField(primary_key=True)
    job: models.CharField[str, str] = models.CharField(max_length=NAME_LENGTH)
    data: models.TextField[str | None, str | None] = models.TextField(null=True)
    requested_at: models.BigIntegerField[int, int] = models.BigIntegerField()

    class Meta:
        db_table = "anarchon_django_store_trigger"
        default_permissions = ()
        indexes = (models.Index(fields=("job",), name="anarchon_store_trigger_job"),)

    def __str__(self) -> str:
        return f"{self.job} ({self.id})"


class StoreValue(models.Model):
    """A small value instances share under ``(job, field)`` (compare-and-set)."""

    id: models.BigAutoField[int, int] = models.BigAutoField(primary_key=True)
    job: models.CharField[str, str] = models.CharField(max_length=NAME_LENGTH)
    field: models.CharField[str, str] = models.CharField(max_length=100)
    value: models.TextField[str, str] = models.TextField()

    class Meta:
        db_table = "anarchon_django_store_value"
        default_permissions = ()
        constraints = (
            models.UniqueConstraint(fields=("job", "field"), name="anarchon_store_value_key"),
        )

    def __str__(self) -> str:
        return f"{self.job}.{self.field}"


class StoreControl(models.Model):
    """A job's runtime-control record (``anarchon.backends.control``): its version (1, 2,
    … per job) and the engine's JSON text (paused, schedule override, dynamic job)."""

    id: models.BigAutoField[int, int] = models.BigAutoField(primary_key=True)
    job: models.CharField[str, str] = models.CharField(max_length=NAME_LENGTH, unique=True)
    version: models.BigIntegerField[int, int] = models.BigIntegerField()
    record: models.TextField[str, str] = models.TextField()
    changed: models.BigIntegerField[int, int] = models.BigIntegerField()

    class Meta:
        db_table = "anarchon_django_store_control"
        default_permissions = ()

    def __str__(self) -> str:
        return f"{self.job} v{self.version}"


class StoreChange(models.Model):
    """One entry (JSON: who changed what) of a job's change log; the newest
    ``CHANGE_LOG_SIZE`` per job are kept."""

    id: models.BigAutoField[int, int] = models.BigAutoField(primary_key=True)
    job: models.CharField[str, str] = models.CharField(max_length=NAME_LENGTH)
    changed: models.BigIntegerField[int, int] = models.BigIntegerField()
    entry: models.TextField[str, str] = models.TextField()

    class Meta:
        db_table = "anarchon_django_store_change"
        default_permissions = ()
        indexes = (models.Index(fields=("job", "id"), name="anarchon_store_change_job"),)

    def __str__(self) -> str:
        return f"{self.job} ({self.id})"


class StoreOffer(models.Model):
    """The handler names one running instance offers (a JSON list), stamped ``seen``
    with the store's clock; listed while younger than ``OFFER_TTL_MS``."""

    id: models.BigAutoField[int, int] = models.BigAutoField(primary_key=True)
    instance: models.CharField[str, str] = models.CharField(max_length=NAME_LENGTH, unique=True)
    handlers: models.TextField[str, str] = models.TextField()
    seen: models.BigIntegerField[int, int] = models.BigIntegerField()

    class Meta:
        db_table = "anarchon_django_store_offer"
        default_permissions = ()

    def __str__(self) -> str:
        return str(self.instance)


class StoreInstance(models.Model):
    """One running instance's liveness record (``anarchon.backends.liveness``): its JSON
    ``record`` (host, pid, version, start, runs held), stamped ``last_seen`` with the
    store's clock at every heartbeat; alive while ``expires`` is ahead of that clock."""

    id: models.BigAutoField[int, int] = models.BigAutoField(primary_key=True)
    instance: models.CharField[str, str] = models.CharField(max_length=NAME_LENGTH, unique=True)
    record: models.TextField[str, str] = models.TextField()
    last_seen: models.BigIntegerField[int, int] = models.BigIntegerField()
    expires: models.BigIntegerField[int, int] = models.BigIntegerField()

    class Meta:
        db_table = "anarchon_django_store_instance"
        default_permissions = ()

    def __str__(self) -> str:
        return str(self.instance)


class StoreGeneration(models.Model):
    """The control generation: one row (``id`` 1) whose ``value`` grows with every
    change. The trigger poll reads it in the same query that looks for triggers, and
    every change locks it first, so changes are serialised and a locked read of it
    gives a consistent snapshot of the records."""

    id: models.PositiveSmallIntegerField[int, int] = models.PositiveSmallIntegerField(
        primary_key=True)
    value: models.BigIntegerField[int, int] = models.BigIntegerField()

    class Meta:
        db_table = "anarchon_django_store_generation"
        default_permissions = ()

    def __str__(self) -> str:
        return str(self.value)
