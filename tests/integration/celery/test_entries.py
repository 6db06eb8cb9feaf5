"""``anarchon_celery.Entry`` against a real SQLite store (no beats): what is stored, what
is refused and why."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from celery import Celery
from celery.schedules import crontab, schedule, solar

from anarchon_celery import HANDLER, Entry, EntryError
from anarchon_celery.entries.entry import core_for
from tests.stores.sqlite import STORE


@pytest.fixture
def app() -> Celery:
    made = Celery("entries-unit", broker="memory://", set_as_current=False)
    made.conf.update(anarchon_backend=STORE.url_for("en_" + uuid.uuid4().hex[:10]),
                     timezone="Europe/Berlin",
                     beat_schedule={"code": {"task": "t.ok", "schedule": 5.0,
                                             "args": [1]}})
    return made


def _job(app: Celery, name: str) -> Any:
    with core_for(app) as core:
        return next(info for info in core.jobs() if info.name == name)


def test_save_stores_a_dynamic_job_with_the_publish_handler(app: Celery) -> None:
    entry = Entry(app, "report", "proj.report", timedelta(minutes=5), args=[1, "a"],
                  kwargs={"k": True}, options={"queue": "q", "priority": 3})
    assert entry.save().version == 1
    info = _job(app, "report")
    assert (info.source, info.handler, info.kind, info.paused) == ("dynamic", HANDLER,
                                                                 "every", False)
    assert info.params == {"task": "proj.report", "args": [1, "a"], "kwargs": {"k": True},
                           "options": {"queue": "q", "priority": 3}}
    loaded = Entry.load(app, "report")
    assert loaded == entry and loaded.schedule == timedelta(minutes=5)
    assert loaded.version == 1


def test_schedules_every_cron_at(app: Celery) -> None:
    Entry(app, "num", "t", 90).save()
    Entry(app, "plain", "t", schedule(timedelta(seconds=30))).save()
    Entry(app, "cron", "t", crontab(minute="*/15", hour="9-17", day_of_week="mon-fri")).save()
    Entry(app, "once", "t", datetime(2031, 5, 1, 8, 30)).save()
    infos = {name: _job(app, name) for name in ("num", "plain", "cron", "once")}
    assert infos["num"].schedule == "every 90s"
    assert infos["plain"].schedule == "every 30s"
    assert infos["cron"].schedule == \
        "cron 0,15,30,45 9,10,11,12,13,14,15,16,17 * * 1,2,3,4,5 (Europe/Berlin)"
    # a naive datetime is read in the app's timezone
    assert infos["once"].schedule == "at 2031-05-01T08:30:00+02:00"
    assert Entry.load(app, "cron").schedule == crontab(
        minute="0,15,30,45", hour="9-17", day_of_week="1-5")


def test_enabled_false_is_paused_and_true_resumes(app: Celery) -> None:
    Entry(app, "e", "t", 10, enabled=False).save()
    assert _job(app, "e").paused and not Entry.load(app, "e").enabled
    with core_for(app) as core:
        assert [c.action for c in core.changes("e")] == ["add"]  # paused in the same change
    Entry(app, "e", "t", 20).save()
    assert not _job(app, "e").paused and _job(app, "e").schedule == "every 20s"
    Entry(app, "e", "t", 20, enabled=False).save()
    assert _job(app, "e").paused


def test_delete(app: Celery) -> None:
    Entry(app, "gone", "t", 10).save()
    Entry.load(app, "gone").delete()
    assert "gone" not in {e.name for e in Entry.all(app)}
    with pytest.raises(LookupError, match="no stored Celery entry named 'gone'"):
        Entry(app, "gone", "t", 10).delete()
    with pytest.raises(LookupError):
        Entry.load(app, "gone")


def test_all_lists_code_entries_read_only(app: Celery) -> None:
    Entry(app, "dyn", "t", 10).save()
    entries = Entry.all(app)
    assert [(e.name, e.read_only) for e in entries] == [("code", True), ("dyn", False)]
    code = Entry.load(app, "code")
    assert code.read_only and code.args == [1]
    with pytest.raises(EntryError, match="defined in the app's beat_schedule"):
        code.save()
    with pytest.raises(EntryError, match="defined in the app's beat_schedule"):
        code.delete()


class _OwnSchedule(schedule):
    """A custom Celery schedule: its own is_due decides."""

    def is_due(self, last_run_at: datetime) -> Any:
        return super().is_due(last_run_at)


def test_solar_and_day_rule_crontab_entries_keep_celerys_slots(app: Celery) -> None:
    """A solar entry and a crontab restricting both day fields are stored as this
    package's schedule types: they read back as given, and the store's next run is the
    one Celery's own schedule gives (the day rule ANDs the days, as Celery does)."""
    from anarchon_celery.schedules.crontab import celery_next_run

    sunset = solar("sunset", 52.5, 13.4)
    both = crontab(minute="0", hour="8", day_of_month="1", day_of_week="mon", app=app)
    Entry(app, "lights", "t", sunset).save()
    Entry(app, "first-monday", "t", both).save()
    stored = {e.name: e for e in Entry.all(app) if not e.read_only}
    assert stored["lights"].schedule == sunset
    assert stored["first-monday"].schedule == both
    with core_for(app) as core:
        now = datetime.now(timezone.utc)
        infos = {info.name: info for info in core.jobs()}
    assert infos["lights"].kind == infos["first-monday"].kind == "custom"
    pinned = solar("sunset", 52.5, 13.4, nowfun=lambda: now)
    expected = {"lights": now + pinned.remaining_estimate(now),
                "first-monday": celery_next_run(both, now)}
    for name, when in expected.items():
        got = infos[name].next_run
        assert got is not None and abs((got - when).total_seconds()) <= 1.0, (name, got)
    first = expected["first-monday"]
    local = first.astimezone(app.timezone)
    assert (local.day, local.weekday()) == (1, 0), "the 1st AND a Monday: Celery's rule"


@pytest.mark.parametrize(("schedule_", "message"), [
    (schedule(timedelta(seconds=5), relative=True), "relative=True intervals cannot be stored"),
    (_OwnSchedule(timedelta(seconds=5)), "its own is_due decides"),
    (0, "interval must be a positive"),
    ("5 minutes", "a str schedule cannot be stored"),
])
def test_refused_schedules(app: Celery, schedule_: Any, message: str) -> None:
    with pytest.raises(EntryError, match=message):
        Entry(app, "bad", "t", schedule_).save()


def test_refused_arguments(app: Celery) -> None:
    with pytest.raises(EntryError, match="args cannot be serialised with the app's "
                                         "task_serializer 'json'"):
        Entry(app, "bad", "t", 5, args=[object()]).save()
    with pytest.raises(EntryError, match="kwargs must be JSON to be stored"):
        Entry(app, "bad", "t", 5, kwargs={"when": datetime.now(timezone.utc)}).save()
    with pytest.raises(EntryError, match="args must be a list or tuple"):
        Entry(app, "bad", "t", 5, args="abc").save()
    with pytest.raises(EntryError, match="task must be a task name"):
        Entry(app, "bad", "", 5).save()
    with pytest.raises(TypeError, match="unknown option"):
        Entry(app, "bad", "t", 5, options={"anarchon": {"nope": 1}}).save()
    assert [e.name for e in Entry.all(app)] == ["code"], "nothing was stored"


def test_job_options_under_anarchon(app: Celery) -> None:
    Entry(app, "opt", "t", 60, options={"queue": "q", "anarchon": {"jitter": 2}}).save()
    info = _job(app, "opt")
    assert info.options == {"jitter": 2, "overlap": "allow"}
    assert Entry.load(app, "opt").options == {"queue": "q", "anarchon": {"jitter": 2}}
