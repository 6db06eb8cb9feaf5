"""Django signals and ANARCHON["LISTENERS"] for run events; failures logged with their
traceback by ``manage.py anarchon run``."""

from __future__ import annotations

import logging
import threading
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import override_settings

from anarchon import Event
from anarchon_django import signals
from anarchon_django.control import runtime
from anarchon_django.management.commands.anarchon import _log_event
from anarchon_django.settings.conf import SettingsError

pytestmark = pytest.mark.django_db(transaction=True)

HEARD: list[Event] = []
HEARD_ONE = threading.Event()


def on_failure(event: Event) -> None:
    """A listener named in ANARCHON["LISTENERS"]."""
    HEARD.append(event)
    HEARD_ONE.set()


def test_signals_are_sent_with_the_event_and_receivers_may_use_the_orm() -> None:
    got: dict[str, dict[str, Any]] = {}
    done = threading.Event()

    def receiver(sender: object, **kwargs: Any) -> None:
        got[kwargs["event"].type] = {**kwargs, "users": User.objects.count(),
                                     "thread": threading.current_thread().name}
        if {"start", "failure"} <= set(got):
            done.set()

    signals.run_started.connect(receiver)
    signals.run_failed.connect(receiver)
    try:
        scheduler = runtime.build_scheduler(["nightly-fail"])
        scheduler.run_now("nightly-fail")
        assert done.wait(10), f"signals not received: {sorted(got)}"
        scheduler.close()
    finally:
        signals.run_started.disconnect(receiver)
        signals.run_failed.disconnect(receiver)
    failure = got["failure"]
    assert failure["name"] == "nightly-fail" and isinstance(failure["error"], RuntimeError)
    assert failure["users"] == 0 and failure["thread"].startswith("anarchon-signals")


def test_listeners_from_settings_are_called() -> None:
    HEARD.clear()
    HEARD_ONE.clear()
    path = f"{__name__}.on_failure"
    with override_settings(ANARCHON={"LISTENERS": {"failure": [path]}}):
        scheduler = runtime.build_scheduler(["nightly-fail"])
        scheduler.run_now("nightly-fail")
        assert HEARD_ONE.wait(10), "the listener was not called"
        scheduler.close()
    assert [(e.type, e.name) for e in HEARD] == [("failure", "nightly-fail")]


@pytest.mark.parametrize(("listeners", "message"), [
    ({"finished": ["a.b"]}, "unknown event"),
    ({"failure": [3]}, "list of dotted paths"),
])
def test_bad_listener_settings_are_named(listeners: dict[str, Any], message: str) -> None:
    with override_settings(ANARCHON={"LISTENERS": listeners}), \
            pytest.raises(SettingsError, match=message) as info:
        runtime.build_scheduler([])
    assert info.value.check_id == "anarchon.E002"


def test_a_listener_that_cannot_be_imported_is_named() -> None:
    with override_settings(ANARCHON={"LISTENERS": {"failure": ["nowhere.at_all"]}}), \
            pytest.raises(SettingsError, match=r"nowhere\.at_all"):
        runtime.build_scheduler([])


def test_run_logs_failures_with_their_traceback(caplog: pytest.LogCaptureFixture) -> None:
    settings: dict[str, str] = {}
    try:
        settings["missing-key"]  # the failure under test
    except KeyError as exc:
        error = exc
    with caplog.at_level(logging.INFO, logger="anarchon_django"):
        _log_event(Event("failure", "nightly", 1, 1, "scheduled", "box", error))
        _log_event(Event("success", "nightly", 2, 1, "scheduled", "box"))
    failure, success = caplog.records
    assert failure.levelno == logging.WARNING and failure.exc_info is not None
    assert "Traceback" in caplog.text and "missing-key" in caplog.text
    assert success.exc_info is None
