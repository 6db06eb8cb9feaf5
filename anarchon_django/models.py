"""Unmanaged models: no tables, only content types and permissions for the admin pages.

* ``anarchon_django.view_run`` — see the run history.
* ``anarchon_django.view_job`` — see the jobs page.
* ``anarchon_django.run_job`` — request a manual run ("Run now").
* ``anarchon_django.change_job`` — pause, resume and reschedule jobs at runtime.
* ``anarchon_django.{view,add,change,delete}_dynamicjob`` — the dynamic jobs' admin.

The ``"django"`` backend's store tables are the ordinary models of
``anarchon_django.store.models``, imported here so Django registers them.
"""

from __future__ import annotations

from django.db import models

from .store.models import (
    StoreAttempt,
    StoreChange,
    StoreControl,
    StoreGeneration,
    StoreJob,
    StoreOffer,
    StoreRun,
    StoreTrigger,
    StoreValue,
)

__all__ = ["DynamicJob", "Job", "Run", "StoreAttempt", "StoreChange", "StoreControl",
           "StoreGeneration", "StoreJob", "StoreOffer", "StoreRun", "StoreTrigger",
           "StoreValue"]


class Run(models.Model):
    """One attempt of a job, as the admin's run history shows it."""

    class Meta:
        managed = False
        db_table = "anarchon_django_run_unmanaged"
        default_permissions = ("view",)
        verbose_name = "run"
        verbose_name_plural = "run history"


class Job(models.Model):
    """A scheduled job, as the admin's jobs page shows it."""

    class Meta:
        managed = False
        db_table = "anarchon_django_job_unmanaged"
        default_permissions = ("view",)
        permissions = (("run_job", "Can request a manual run (Run now)"),
                       ("change_job", "Can pause, resume and reschedule jobs"))
        verbose_name = "job"
        verbose_name_plural = "jobs"


class DynamicJob(models.Model):
    """A job stored at runtime (``add_job()``), as the dynamic jobs' admin shows it."""

    class Meta:
        managed = False
        db_table = "anarchon_django_dynamicjob_unmanaged"
        verbose_name = "dynamic job"
        verbose_name_plural = "dynamic jobs"


class Instance(models.Model):
    """A running instance, as the admin's Instances page shows it (read-only)."""

    class Meta:
        managed = False
        db_table = "anarchon_django_instance_unmanaged"
        default_permissions = ("view",)
        verbose_name = "instance"
        verbose_name_plural = "instances"
