"""One option vocabulary for both task-queue layers (``anarchon.handoff.options``):
``track`` and ``resend``. Celery's old names (``track_outcomes``, ``republish``, and the
config keys ``anarchon_track_outcomes``, ``anarchon_republish``) keep working for one
release: each use warns with a ``DeprecationWarning`` and means the new name; both names
of one option at once are refused."""

from __future__ import annotations

from typing import Any
from zoneinfo import ZoneInfo

import pytest
from celery import Celery
from celery.beat import ScheduleEntry
from celery.schedules import schedule

from anarchon.handoff import canonical_options
from anarchon_celery import ConfigurationError, Scheduler
from anarchon_celery.beat.config import resolve
from anarchon_celery.schedules.convert import convert_entry


def _app(**conf: Any) -> Celery:
    app = Celery("names", set_as_current=False, broker="memory://")
    app.conf.update(anarchon_backend="sqlite:///unused.db", timezone="UTC", **conf)
    return app


def test_the_new_config_keys_are_read_without_a_warning(recwarn: pytest.WarningsRecorder
                                                        ) -> None:
    settings = resolve(_app(anarchon_track=True, anarchon_resend=True))
    assert (settings.track, settings.resend) == (True, True)
    assert not [w for w in recwarn if issubclass(w.category, DeprecationWarning)]


@pytest.mark.parametrize(("old", "new"), [("anarchon_track_outcomes", "track"),
                                          ("anarchon_republish", "resend")])
def test_an_old_config_key_warns_and_means_the_new_one(old: str, new: str) -> None:
    with pytest.warns(DeprecationWarning, match=f"'{old}' is deprecated, use 'anarchon_{new}'"):
        settings = resolve(_app(**{old: True}))
    assert getattr(settings, new) is True
    with pytest.warns(DeprecationWarning, match="is deprecated"):
        assert getattr(settings, old.removeprefix("anarchon_")) is True


def test_both_names_of_one_setting_disagreeing_are_refused() -> None:
    with pytest.raises(ConfigurationError, match="anarchon_republish and anarchon_resend"):
        resolve(_app(anarchon_republish=True, anarchon_resend=False))


def test_an_old_entry_option_warns_and_means_the_new_one() -> None:
    schedule = {"tracked": {"task": "t", "schedule": 5.0,
                            "options": {"anarchon": {"track_outcomes": True,
                                                     "republish": True}}}}
    with pytest.warns(DeprecationWarning, match="'track_outcomes' is deprecated"):
        plans = Scheduler(_app(beat_schedule=schedule), lazy=True).plans()
    plan = next(p for p in plans if p.name == "tracked")
    assert plan.extra == {"track": True, "resend": True}


def test_an_entry_giving_both_names_is_refused() -> None:
    app = _app()
    entry = ScheduleEntry("twice", "t", schedule=schedule(5.0), app=app,
                          options={"anarchon": {"track_outcomes": True, "track": True}})
    with pytest.raises(ConfigurationError, match="'track_outcomes' and 'track' are the same"):
        convert_entry("twice", entry, ZoneInfo("UTC"))


def test_canonical_options_leaves_the_new_names_alone(recwarn: pytest.WarningsRecorder
                                                      ) -> None:
    assert canonical_options({"track": True, "x": 1}, "here") == {"track": True, "x": 1}
    assert not recwarn.list
