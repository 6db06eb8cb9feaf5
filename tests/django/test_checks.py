"""Every system check id, and that ordinary checks do no I/O."""

from __future__ import annotations

from typing import Any

import pytest
from django.conf import settings
from django.core import checks
from django.test import override_settings

from anarchon_django.settings.checks import check_settings, check_store

GOOD = "tests.django.testapp.handlers.fail"


def ids(messages: list[checks.CheckMessage]) -> list[str]:
    return [str(m.id) for m in messages]


def test_the_test_project_is_clean() -> None:
    assert check_settings() == []


@pytest.mark.parametrize(("anarchon", "expected"), [
    (["django"], "anarchon.E001"),
    ({"BACKEN": "django"}, "anarchon.E002"),
    ({"BACKEND": "ftp://x"}, "anarchon.E003"),
    ({"BACKEND": "anarchon_django.no_such.Backend"}, "anarchon.E003"),
    ({"SCHEDULER": {"lease": "forever"}}, "anarchon.E004"),
    ({"SCHEDULER": {"colour": "red"}}, "anarchon.E004"),
    ({"SCHEDULER": {"timezone": "Mars/Olympus"}}, "anarchon.E004"),
    ({"JOBS": {"j": {"callable": "tests.nope.handler", "every": "1s"}}}, "anarchon.E005"),
    ({"JOBS": {"j": {"callable": GOOD, "cron": "61 * * * *"}}}, "anarchon.E005"),
    ({"JOBS": {"j": {"callable": GOOD, "every": "-1s"}}}, "anarchon.E005"),
    ({"JOBS": {"j": {"callable": GOOD, "cron": "0 2 * * *", "timezone": "Nowhere/X"}}},
     "anarchon.E005"),
    ({"JOBS": {"greet": {"callable": GOOD, "every": "1m"}}}, "anarchon.E006"),
    ({"SCHEDULER": {"lease": "5s", "heartbeat": "5s"}}, "anarchon.E007"),
    ({"SCHEDULER": {"lease": "6s", "heartbeat": "3s"}}, "anarchon.W002"),
])
def test_each_error_id(anarchon: Any, expected: str) -> None:
    with override_settings(ANARCHON=anarchon):
        assert expected in ids(check_settings())


def test_use_tz_false_warns() -> None:
    with override_settings(USE_TZ=False):
        assert "anarchon.W001" in ids(check_settings())


def test_checks_are_registered_with_django() -> None:
    with override_settings(ANARCHON={"BACKEN": "x"}):
        found = checks.run_checks(tags=["anarchon"])
    assert "anarchon.E002" in ids(found)


def test_ordinary_checks_do_not_reach_the_store() -> None:
    # an unreachable server is not noticed by ordinary checks, only by deploy checks
    with override_settings(ANARCHON={"BACKEND": "redis://127.0.0.1:1/0"}):
        assert check_settings() == []
        assert "anarchon.E008" in ids(check_store())


@pytest.mark.django_db(transaction=True)
def test_deploy_check_warns_about_sqlite_and_reaches_the_store() -> None:
    assert ids(check_store()) == ["anarchon.W003"]
    with override_settings(ANARCHON={**settings.ANARCHON,
                                      "BACKEND": "sqlite:////nonexistent/dir/x.db"}):
        assert ids(check_store()) == ["anarchon.W003", "anarchon.E008"]


def test_deploy_checks_run_only_with_deploy() -> None:
    with override_settings(ANARCHON={"BACKEND": "redis://127.0.0.1:1/0"}):
        assert "anarchon.E008" not in ids(checks.run_checks(tags=["anarchon"]))
        assert "anarchon.E008" in ids(checks.run_checks(tags=["anarchon"],
                                                        include_deployment_checks=True))
