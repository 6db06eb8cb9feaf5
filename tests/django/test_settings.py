"""The ANARCHON setting, the backends it builds, autodiscovery and job declarations."""

from __future__ import annotations

import importlib
import sys
from typing import Any

import pytest
from django.apps import apps
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

import anarchon_django
from anarchon import RunContext, SqliteBackend
from anarchon.backends.postgres import PostgresBackend
from anarchon.backends.redis import RedisBackend
from anarchon_django.apps import autodiscover
from anarchon_django.control import runtime
from anarchon_django.settings import conf, declarations
from anarchon_django.settings.backend import build_backend, django_backend, postgres_dsn
from anarchon_django.settings.conf import SettingsError, get_settings, parse


def test_defaults_when_the_setting_is_missing() -> None:
    parsed = parse(None)
    assert parsed.backend == "django"
    assert parsed.options == {} and parsed.scheduler == {} and parsed.jobs == ()
    assert parsed.autodiscover == ("jobs",)


def test_full_setting_is_parsed() -> None:
    parsed = parse({
        "BACKEND": "redis://localhost:1/0",
        "OPTIONS": {"prefix": "shop:"},
        "SCHEDULER": {"lease": "10s", "timezone": "Europe/Berlin"},
        "JOBS": {"nightly": {"callable": "reports.jobs.nightly", "cron": "0 2 * * *",
                             "timezone": "Europe/Berlin", "max_attempts": 1}},
        "AUTODISCOVER": ["jobs", "tasks"],
    })
    assert parsed.backend == "redis://localhost:1/0"
    assert parsed.options == {"prefix": "shop:"}
    assert parsed.scheduler_arguments() == {"lease": "10s", "timezone": "Europe/Berlin"}
    (job,) = parsed.jobs
    assert (job.name, job.kind, job.when, job.callable) == (
        "nightly", "cron", "0 2 * * *", "reports.jobs.nightly")
    assert job.options == {"timezone": "Europe/Berlin", "max_attempts": 1}
    assert parsed.autodiscover == ("jobs", "tasks")


@pytest.mark.parametrize(("raw", "check_id"), [
    ("redis://", "anarchon.E001"),
    ({"BACKEND": "django", "BACKENDS": {}}, "anarchon.E002"),
    ({"OPTIONS": []}, "anarchon.E002"),
    ({"AUTODISCOVER": "jobs"}, "anarchon.E002"),
    ({"BACKEND": 3}, "anarchon.E003"),
    ({"JOBS": {"x": {"cron": "* * * * *"}}}, "anarchon.E005"),
    ({"JOBS": {"x": {"callable": "a.b", "cron": "* * * * *", "every": "1s"}}},
     "anarchon.E005"),
])
def test_bad_settings_raise_with_their_check_id(raw: Any, check_id: str) -> None:
    with pytest.raises(SettingsError) as info:
        parse(raw)
    assert info.value.check_id == check_id
    assert isinstance(info.value, ImproperlyConfigured)


def test_setting_changed_rereads_the_setting() -> None:
    assert get_settings().scheduler["lease"] == "2s"
    with override_settings(ANARCHON={"SCHEDULER": {"lease": "9s"}}):
        assert get_settings().scheduler == {"lease": "9s"}
    assert get_settings().scheduler["lease"] == "2s"


def test_timezone_defaults_to_time_zone() -> None:
    with override_settings(TIME_ZONE="Asia/Tokyo", ANARCHON={}):
        assert get_settings().scheduler_arguments()["timezone"] == "Asia/Tokyo"
        scheduler = runtime.build_scheduler()
        assert scheduler.core.options.defaults["timezone"] == "Asia/Tokyo"


def test_unknown_database_alias() -> None:
    with pytest.raises(SettingsError, match="not in DATABASES") as info:
        django_backend(database="replica")
    assert info.value.check_id == "anarchon.E003"


def test_postgres_dsn_from_database_settings() -> None:
    dsn = postgres_dsn({"NAME": "shop", "USER": "app", "PASSWORD": "p w", "HOST": "db",
                        "PORT": 5433, "OPTIONS": {"sslmode": "require", "pool": True}})
    assert "dbname=shop" in dsn and "user=app" in dsn and "host=db" in dsn
    assert "port=5433" in dsn and "sslmode=require" in dsn and "pool" not in dsn
    assert "password='p w'" in dsn


def test_backend_from_url_dotted_path_and_instance() -> None:
    redis = build_backend(parse({"BACKEND": "redis://localhost:1", "OPTIONS": {
        "prefix": "shop:"}}))
    assert isinstance(redis, RedisBackend)
    dotted = build_backend(parse({"BACKEND": "anarchon.SqliteBackend",
                                  "OPTIONS": {"database": "/tmp/x.db", "table": "abc"}}))
    assert isinstance(dotted, SqliteBackend) and dotted.table == "abc"
    pg = build_backend(parse({"BACKEND": "postgresql://postgres@127.0.0.1/test",
                              "OPTIONS": {"table": "runs"}}))
    assert isinstance(pg, PostgresBackend)
    given = SqliteBackend("/tmp/y.db")
    assert build_backend(parse({"BACKEND": given})) is given


@pytest.mark.parametrize(("backend", "message"), [
    ("ftp://example.com", "unknown backend URL scheme"),
    ("no.such.module.Backend", "cannot be imported"),
    ("anarchon.RunContext", "not an anarchon Backend"),
])
def test_bad_backends(backend: str, message: str) -> None:
    with pytest.raises(SettingsError, match=message) as info:
        build_backend(parse({"BACKEND": backend}))
    assert info.value.check_id == "anarchon.E003"


def test_autodiscovery_found_the_test_apps_jobs() -> None:
    names = {d.name for d in declarations.declared()}
    assert {"greet", "nightly-fail", "count-users"} <= names
    assert apps.is_installed("anarchon_django")


def test_autodiscovery_skips_a_missing_module() -> None:
    with override_settings(ANARCHON={"AUTODISCOVER": ["no_such_module_anywhere"]}):
        autodiscover()


def test_autodiscovery_propagates_an_import_error_inside_a_jobs_module() -> None:
    sys.modules.pop("tests.django.testapp.broken_jobs", None)
    with override_settings(ANARCHON={"AUTODISCOVER": ["broken_jobs"]}), \
            pytest.raises(ImportError, match="anarchon_django_no_such_module"):
        autodiscover()


def test_decorators_check_at_once_and_refuse_duplicates() -> None:
    with pytest.raises(ValueError, match="cron"):
        anarchon_django.cron("bad-cron", "not a cron")
    with pytest.raises(TypeError, match="unknown option"):
        anarchon_django.every("bad-option", "1s", colour="red")
    with pytest.raises(ValueError, match="already declared"):
        @anarchon_django.every("greet", "5m")
        def other(ctx: RunContext) -> None: ...


def test_reimporting_a_jobs_module_is_not_a_duplicate() -> None:
    importlib.reload(importlib.import_module("tests.django.testapp.jobs"))
    assert [d.name for d in declarations.declared()].count("greet") == 1


def test_settings_jobs_join_decorated_jobs(table: str) -> None:
    jobs = {"settings-job": {"callable": "tests.django.testapp.handlers.fail",
                             "every": "10m", "max_attempts": 1}}
    with override_settings(ANARCHON={**settings.ANARCHON, "JOBS": jobs}):
        scheduler = runtime.build_scheduler()
        assert "settings-job" in scheduler.job_names and "greet" in scheduler.job_names
        only = runtime.build_scheduler(["settings-job"])
        assert only.job_names == ["settings-job"]
        with pytest.raises(LookupError, match="nope"):
            runtime.build_scheduler(["nope"])


def test_settings_job_clashing_with_a_decorated_one() -> None:
    jobs = {"greet": {"callable": "tests.django.testapp.handlers.fail",
                      "every": "10m"}}
    with override_settings(ANARCHON={**settings.ANARCHON, "JOBS": jobs}), \
            pytest.raises(ValueError, match="declared twice"):
        runtime.build_scheduler()


def test_reset_drops_the_shared_scheduler() -> None:
    first = runtime.get_scheduler()
    assert runtime.get_scheduler() is first
    conf.reset()
    assert runtime.get_scheduler() is not first
