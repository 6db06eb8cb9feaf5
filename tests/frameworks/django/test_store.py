"""The "django" backend: the ORM store on the database the settings or routers choose,
real migrations, and an in-place upgrade from the old 0001's tables."""

from __future__ import annotations

import asyncio
import io
import os
import tempfile
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from django.core.management import call_command
from django.db import connections
from django.db.models import Model
from django.test import override_settings
from django.test.utils import CaptureQueriesContext

from anarchon import SqliteBackend, from_url
from anarchon.backends import Backend
from anarchon.backends.base import ClaimRequest, Finish, JobSpec, Poll
from anarchon.backends.control import ControlChange
from anarchon_django.backend import django_backend
from anarchon_django.conf import SettingsError
from anarchon_django.store.backend import DjangoBackend
from anarchon_django.store.models import StoreAttempt, StoreGeneration, StoreJob
from tests.stores import in_ci
from tests.stores.django_support import admin, server_config, server_url, unavailable


class ToMemory:
    """A router sending the anarchon store to the ``memory`` database."""

    def db_for_write(self, model: type[Model], **hints: Any) -> str | None:
        return "memory" if model._meta.app_label == "anarchon_django" else None

    db_for_read = db_for_write

    def allow_migrate(self, db: str, app_label: str, **hints: Any) -> bool | None:
        if app_label == "anarchon_django":
            return db == "memory"
        return None


def alias(backend: object) -> str:
    assert isinstance(backend, DjangoBackend)
    return backend.alias


def test_the_django_backend_is_the_orm_store_on_the_default_database() -> None:
    backend = django_backend()
    assert isinstance(backend, DjangoBackend) and backend.alias == "default"
    assert backend.name == "django:sqlite"
    assert alias(django_backend(database="memory")) == "memory"


def test_the_store_follows_database_routers() -> None:
    with override_settings(DATABASE_ROUTERS=[f"{__name__}.ToMemory"]):
        assert alias(django_backend()) == "memory"
        assert alias(django_backend(database="default")) == "default"  # explicit wins


def test_unknown_options_are_refused() -> None:
    with pytest.raises(SettingsError, match="prefix") as info:
        django_backend(prefix="x")
    assert info.value.check_id == "anarchon.E003"


@pytest.mark.django_db(transaction=True)
def test_sqlmigrate_shows_the_store_ddl() -> None:
    out = io.StringIO()
    call_command("sqlmigrate", "anarchon_django", "0002", stdout=out)
    sql = out.getvalue()
    for table in ("store_job", "store_run", "store_attempt", "store_trigger"):
        assert f'CREATE TABLE "anarchon_django_{table}"' in sql
    assert "UNIQUE" in sql and '"anarchon_store_run_slot"' in sql


@pytest.mark.django_db(transaction=True, databases=["default", "memory"])
def test_the_in_memory_test_database_holds_the_store() -> None:
    backend = DjangoBackend("memory")

    async def claim_and_finish() -> bool:
        await backend.register([JobSpec("mem", "every", "1h")])
        won = await backend.claim(ClaimRequest("mem", 1, "me", "takeover", 1000, 1000, 3,
                                               "allow", expected_attempt=0))
        assert won.outcome == "taken"
        slot = won.store_ms
        result = await backend.claim(ClaimRequest("mem", slot, "me", "scheduled", 1000,
                                                  60_000, 3, "allow"))
        assert result.outcome == "won"
        done = await backend.finish(Finish("mem", slot, "me", 1, "success", None, 10, None,
                                           60_000))
        await backend.close()
        return done

    assert asyncio.run(claim_and_finish())
    assert StoreAttempt.objects.using("memory").get(job="mem").status == "success"


@pytest.fixture(params=["sqlite", "postgres"])
def legacy(request: pytest.FixtureRequest, django_db_blocker: Any) -> Iterator[
        tuple[str, Backend]]:
    """A database that applied the old 0001 (the core's store tables, no store models):
    its alias and the old backend on it."""
    namespace = "legacy_" + uuid.uuid4().hex[:10]
    if request.param == "sqlite":
        path = os.path.join(tempfile.mkdtemp(prefix="anarchon-legacy-"), "old.db")
        config: dict[str, Any] = {"ENGINE": "django.db.backends.sqlite3", "NAME": path}
        old: Backend = SqliteBackend(path)  # the old 0001's table: anarchon_runs
    else:
        reason = unavailable("postgres")
        if reason is not None:
            if in_ci():
                pytest.fail(f"CI needs PostgreSQL: {reason}", pytrace=False)
            pytest.skip(reason)
        admin("postgres", f"CREATE SCHEMA {namespace}")
        config = server_config("postgres")
        config["OPTIONS"] = {"options": f"-c search_path={namespace}"}
        old = from_url(f"{server_url('postgres')}?table={namespace}.anarchon_runs")
    both = {"default": connections.settings["default"], namespace: config}
    connections.settings[namespace] = connections.configure_settings(both)[namespace]
    try:
        with django_db_blocker.unblock():
            yield namespace, old
            connections[namespace].close()
    finally:
        del connections.settings[namespace]
        if request.param == "postgres":
            admin("postgres", f"DROP SCHEMA IF EXISTS {namespace} CASCADE")


def test_an_old_install_upgrades_in_place_keeping_its_history(
        legacy: tuple[str, Backend]) -> None:
    legacy_alias, old = legacy

    async def old_history() -> int:
        await old.register([JobSpec("nightly", "cron", "0 2 * * *")])
        # a takeover of a run that does not exist writes nothing and tells the store's
        # time (a 60 s lease: a claim may wait a quarter of its lease for the lock)
        slot = (await old.claim(ClaimRequest("nightly", 0, "old", "takeover", 60_000, 1, 1,
                                             "allow"))).store_ms
        await old.claim(ClaimRequest("nightly", slot, "old", "scheduled", 60_000, 60_000, 3,
                                     "allow"))
        await old.finish(Finish("nightly", slot, "old", 1, "failure", "KeyError: 'x'", 100,
                                None, 3_600_000))
        await old.close()
        return slot

    slot = asyncio.run(old_history())
    call_command("migrate", "anarchon_django", database=legacy_alias, verbosity=0)
    attempt = StoreAttempt.objects.using(legacy_alias).get()
    assert (attempt.job, attempt.slot, attempt.status, attempt.error) == (
        "nightly", slot, "failure", "KeyError: 'x'")
    job = StoreJob.objects.using(legacy_alias).get()
    assert job.schedule == "0 2 * * *" and job.first_seen <= slot
    records = DjangoBackend(legacy_alias).store.history("nightly", 5)
    assert [r.error for r in records] == ["KeyError: 'x'"]


@pytest.mark.django_db(databases=["default", "memory"])
def test_the_migrations_match_the_store_models() -> None:
    out = io.StringIO()
    call_command("makemigrations", "anarchon_django", check=True, dry_run=True, stdout=out)
    assert "No changes detected" in out.getvalue()


@pytest.mark.django_db(transaction=True, databases=["default", "memory"])
def test_the_idle_poll_is_one_query_with_the_generation() -> None:
    store = DjangoBackend("memory").store
    store.poll(["job"])  # the flush ending the previous test deleted the generation row
    with CaptureQueriesContext(connections["memory"]) as queries:
        assert store.poll(["job"]) == Poll([], 0)
    assert len(queries) == 1, [q["sql"] for q in queries]
    assert store.change_control(ControlChange("job", 0, "{}", "{}")) == 1
    assert store.poll(["job"]).generation == 1


@pytest.mark.django_db(transaction=True, databases=["default", "memory"])
def test_a_deleted_generation_row_is_made_again() -> None:
    store = DjangoBackend("memory").store
    StoreGeneration.objects.using("memory").all().delete()  # what a flush does
    assert store.poll(["job"]).generation == 0
    assert store.read_controls().generation == 0
    StoreGeneration.objects.using("memory").all().delete()
    assert store.change_control(ControlChange("job", 0, '{"paused":true}', "{}")) == 1
    snapshot = store.read_controls()
    assert snapshot.generation == 1 and snapshot.records["job"].version == 1
    assert store.purge() == 2  # the record and its log entry; the generation stays
    assert store.read_controls().generation == 2
