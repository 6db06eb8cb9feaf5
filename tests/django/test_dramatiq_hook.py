"""``manage.py anarchon run`` also schedules actors marked with anarchon_dramatiq."""

from __future__ import annotations

import io
import logging
import sys
from collections.abc import Iterator

import pytest
from django.conf import settings
from django.core.management import call_command
from django.test import override_settings

from anarchon_django.control import runtime
from anarchon_django.settings.conf import SettingsError, parse

dramatiq = pytest.importorskip("dramatiq")


@pytest.fixture
def stub_broker() -> Iterator[object]:
    from dramatiq.brokers.stub import StubBroker

    previous = dramatiq.get_broker()
    broker = StubBroker()
    dramatiq.set_broker(broker)
    yield broker
    dramatiq.set_broker(previous)


def test_marked_actors_become_jobs_when_enabled(table: str, stub_broker: object) -> None:
    from anarchon_dramatiq import every

    @every("5m")
    @dramatiq.actor
    def refresh_hook_test() -> None: ...

    with override_settings(ANARCHON={**settings.ANARCHON, "DRAMATIQ": True}):
        scheduler = runtime.build_scheduler()
        assert "refresh_hook_test" in scheduler.job_names
    with override_settings(ANARCHON={**settings.ANARCHON, "DRAMATIQ": False}):
        assert "refresh_hook_test" not in runtime.build_scheduler().job_names


TASKS = "tests.django.testapp.tasks"


@pytest.mark.django_db(transaction=True)  # the "django" store is the project's database
def test_actors_in_tasks_modules_are_found_and_share_the_project_history(
        table: str, stub_broker: object) -> None:
    """Actors where django_dramatiq finds them (``tasks``) become jobs with no setting
    but ``DRAMATIQ``; their runs land in the project's store, next to plain jobs, so
    ``manage.py anarchon history`` shows them."""
    sys.modules.pop(TASKS, None)  # imported again, on this test's broker
    with override_settings(ANARCHON={**settings.ANARCHON, "DRAMATIQ": True}):
        scheduler = runtime.build_scheduler()
        try:
            assert "testapp-tasks-refresh" in scheduler.job_names
            assert "greet" in scheduler.job_names  # a plain job of the same project
            record = scheduler.run_now("testapp-tasks-refresh")
            assert record.status == "success"
        finally:
            scheduler.close()
        runtime.reset()
        out = io.StringIO()
        call_command("anarchon", "history", "testapp-tasks-refresh", stdout=out)
        runtime.reset()
    assert "testapp-tasks-refresh" in out.getvalue() and "success" in out.getvalue()
    assert len(stub_broker.queues["default"].queue) == 1  # type: ignore[attr-defined]


def test_no_marked_actor_is_a_warning(table: str, stub_broker: object,
                                      caplog: pytest.LogCaptureFixture) -> None:
    from anarchon_dramatiq.discovery import register_project_actors

    scheduler = runtime.build_scheduler()  # DRAMATIQ off: nothing registered yet
    try:
        with caplog.at_level(logging.WARNING, "anarchon.dramatiq"), \
                override_settings(DRAMATIQ_AUTODISCOVER_MODULES=["no_such_module"]):
            assert register_project_actors(scheduler, broker=stub_broker) == []
    finally:
        scheduler.close()
    assert "no actor is marked" in caplog.text and "no_such_module" in caplog.text


def test_dramatiq_setting_must_be_a_bool() -> None:
    with pytest.raises(SettingsError, match="DRAMATIQ"):
        parse({"DRAMATIQ": "yes"})
