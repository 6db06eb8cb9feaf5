"""The "django" backend: the ORM store on the database the settings or routers choose,
and its one real migration."""

from __future__ import annotations

import asyncio
import io
from typing import Any

import pytest
from django.core.management import call_command
from django.db import connections
from django.db.models import Model
from django.test import override_settings
from django.test.utils import CaptureQueriesContext

from anarchon.backends.base import ClaimRequest, Finish, JobSpec, Poll
from anarchon.backends.control import ControlChange
from anarchon_django.settings.backend import django_backend
from anarchon_django.settings.conf import SettingsError
from anarchon_django.store.backend import DjangoBackend
from anarchon_django.store.models import StoreAttempt, StoreGeneration


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
    # the store's tables are the app's models: no table option to name them
    with pytest.raises(SettingsError, match=r"'table'.*'database' and 'trigger_ttl'"):
        django_backend(table="anarchon_runs")


@pytest.mark.django_db(transaction=True)
def test_sqlmigrate_shows_the_store_ddl() -> None:
    out = io.StringIO()
    call_command("sqlmigrate", "anarchon_django", "0001", stdout=out)
    sql = out.getvalue()
    for table in ("store_job", "store_run", "store_attempt", "store_trigger", "store_value",
                  "store_control", "store_change", "store_offer", "store_generation"):
        assert f'CREATE TABLE "anarchon_django_{table}"' in sql
    assert "UNIQUE" in sql and '"anarchon_store_run_slot"' in sql
    assert '"anarchon_store_value_key"' in sql
    assert "_unmanaged" not in sql  # the admin's permission models have no tables


def test_the_app_has_one_migration() -> None:
    """The schema is one initial migration (squashed before the first release)."""
    from django.db.migrations.loader import MigrationLoader

    loader = MigrationLoader(None, ignore_no_migrations=True)
    names = sorted(name for app, name in loader.disk_migrations if app == "anarchon_django")
    assert names == ["0001_initial"]


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
