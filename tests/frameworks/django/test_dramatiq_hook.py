"""``manage.py anarchon run`` also schedules actors marked with anarchon_dramatiq."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.conf import settings
from django.test import override_settings

from anarchon_django import runtime
from anarchon_django.conf import SettingsError, parse

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

    with override_settings(ANARCHON={**settings.ANARCHON, "OPTIONS": {"table": table},
                                     "DRAMATIQ": True}):
        scheduler = runtime.build_scheduler()
        assert "refresh_hook_test" in scheduler.job_names
    with override_settings(ANARCHON={**settings.ANARCHON, "OPTIONS": {"table": table},
                                     "DRAMATIQ": False}):
        assert "refresh_hook_test" not in runtime.build_scheduler().job_names


def test_dramatiq_setting_must_be_a_bool() -> None:
    with pytest.raises(SettingsError, match="DRAMATIQ"):
        parse({"DRAMATIQ": "yes"})
