"""``manage.py anarchon import-celery-beat`` on real django-celery-beat rows (the test
project's database) into a real SQLite anarchon store."""

from __future__ import annotations

import io
import os
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from celery import Celery
from celery.schedules import crontab, solar
from django.core.management import CommandError, call_command

from anarchon_celery import Entry
from anarchon_celery.entries.entry import core_for
from anarchon_celery.schedules.crontab import celery_next_run
from tests.stores.sqlite import STORE

pytest.importorskip("django_celery_beat")
pytestmark = pytest.mark.django_db

#: the Celery app the command loads (``--app``); each test points it at a store of its own
APP = Celery("import-celery-beat", broker="memory://", set_as_current=False)
APP.conf.update(timezone="UTC", beat_schedule={"code": {"task": "proj.code",
                                                          "schedule": 5.0}})
TABLES = Path(os.environ.get("ANARCHON_IMPORT_TABLES") or "/tmp/anarchon_import_tables.txt")
UTC = timezone.utc


@pytest.fixture(autouse=True)
def store() -> Iterator[None]:
    APP.conf.anarchon_backend = STORE.url_for("dcb_" + uuid.uuid4().hex[:10])
    yield
    APP.conf.anarchon_backend = None


def _rows() -> None:
    from django_celery_beat.models import (
        ClockedSchedule,
        CrontabSchedule,
        IntervalSchedule,
        PeriodicTask,
        SolarSchedule,
    )

    now = datetime.now(UTC)
    every_10s = IntervalSchedule.objects.create(every=10, period="seconds")
    every_2h = IntervalSchedule.objects.create(every=2, period="hours")
    berlin = CrontabSchedule.objects.create(minute="30", hour="7", day_of_week="mon-fri",
                                            timezone=ZoneInfo("Europe/Berlin"))
    both = CrontabSchedule.objects.create(minute="0", hour="0", day_of_month="1",
                                          day_of_week="1", timezone=ZoneInfo("UTC"))
    clocked = ClockedSchedule.objects.create(clocked_time=now + timedelta(days=30))
    past = ClockedSchedule.objects.create(clocked_time=now - timedelta(days=1))
    solar = SolarSchedule.objects.create(event="sunset", latitude=52.5, longitude=13.4)
    make = PeriodicTask.objects.create
    make(name="interval", task="proj.work", interval=every_10s, args="[1, 2]",
         kwargs='{"full": true}', queue="reports", exchange="ex", routing_key="rk",
         priority=4, headers='{"h": "v"}', expire_seconds=30)
    make(name="berlin", task="proj.morning", crontab=berlin,
         expires=now + timedelta(days=365))
    make(name="both-days", task="proj.x", crontab=both)
    make(name="clocked", task="proj.once", clocked=clocked, one_off=True)
    make(name="clocked-past", task="proj.once", clocked=past, one_off=True)
    make(name="sunset", task="proj.lights", solar=solar)
    make(name="off", task="proj.work", interval=every_2h, enabled=False)
    make(name="one-off", task="proj.first", interval=every_2h, one_off=True)
    make(name="later", task="proj.work", interval=every_2h,
         start_time=now + timedelta(days=3))
    make(name="expired", task="proj.work", interval=every_2h,
         expires=now - timedelta(hours=1))
    make(name="code", task="proj.code", interval=every_10s)


def _command(*args: str) -> str:
    out = io.StringIO()
    call_command("anarchon", "import-celery-beat", "--app",
                 "tests.django.test_import_celery_beat:APP", *args, stdout=out)
    return out.getvalue()


def _actions(table: str) -> dict[str, str]:
    rows = table.split("\n\n")[0].splitlines()[2:]
    return {line.split()[0]: line.split()[-1] for line in rows}


def test_dry_run_apply_idempotent_disable_source() -> None:
    from django_celery_beat.models import PeriodicTask

    _rows()
    dry = _command()
    with TABLES.open("a") as handle:
        handle.write("import-celery-beat dry run:\n" + dry + "\n")
    actions = _actions(dry)
    assert actions == {
        "berlin": "add", "both-days": "add", "clocked": "add", "clocked-past": "refused",
        "code": "refused", "expired": "refused", "interval": "add", "later": "refused",
        "off": "add", "one-off": "add", "sunset": "add"}
    for reason in ("has passed", "beat_schedule defines this name", "expired at",
                   "is in the future"):
        assert reason in dry
    assert [e.name for e in Entry.all(APP)] == ["code"], "a dry run writes nothing"

    applied = _command("--apply")
    assert "applied: 7 add, 0 update, 0 same, 4 refused" in applied
    stored = {e.name: e for e in Entry.all(APP) if not e.read_only}
    interval = stored["interval"]
    assert (interval.task, interval.schedule, interval.args, interval.kwargs) == (
        "proj.work", timedelta(seconds=10), [1, 2], {"full": True})
    assert interval.options == {"queue": "reports", "exchange": "ex", "routing_key": "rk",
                                "priority": 4, "headers": {"h": "v"}, "expires": 30}
    berlin = stored["berlin"]
    assert berlin.schedule == crontab(minute="30", hour="7", day_of_week="1-5")
    _berlin_agrees_with_its_row(berlin, PeriodicTask.objects.get(name="berlin").schedule)
    options = dict(berlin.options or {})
    assert options["anarchon"] == {"timezone": "Europe/Berlin"}
    assert isinstance(options["expires"], str)
    assert isinstance(stored["clocked"].schedule, datetime)
    assert isinstance(stored["one-off"].schedule, datetime)
    assert not stored["off"].enabled
    assert stored["both-days"].schedule == crontab(minute="0", hour="0", day_of_month="1",
                                                   day_of_week="1")
    assert stored["sunset"].schedule == solar("sunset", 52.5, 13.4)
    _next_runs_match_the_source(PeriodicTask.objects.get(name="both-days").schedule,
                                PeriodicTask.objects.get(name="sunset").schedule)

    again = _command("--apply", "--disable-source")
    assert "applied: 0 add, 0 update, 7 same, 4 refused" in again
    assert "disabled 6 django-celery-beat task(s)" in again  # "off" was disabled already
    assert {t.name for t in PeriodicTask.objects.filter(enabled=True)} == {
        "clocked-past", "code", "expired", "later"}
    assert {e.name: e.version for e in Entry.all(APP) if not e.read_only} == {
        name: 1 for name in stored}, "applying twice changed nothing"


def _berlin_agrees_with_its_row(entry: Any, row: Any) -> None:
    """The imported Europe/Berlin crontab keeps its zone: Celery's own maths on
    ``entry.schedule`` and the stored definition (``entry.remaining_estimate``) both give
    the django-celery-beat row's ``remaining_estimate``, also across DST changes."""
    assert entry.schedule.tz == ZoneInfo("Europe/Berlin")
    for last in (datetime.now(UTC) - timedelta(days=1), datetime(2026, 3, 27, 7, 0, tzinfo=UTC),
                 datetime(2026, 10, 23, 9, 0, tzinfo=UTC), datetime.now(UTC)):
        want = row.remaining_estimate(last)
        for got in (entry.schedule.remaining_estimate(last), entry.remaining_estimate(last)):
            assert abs((got - want).total_seconds()) < 1.0, (last, got, want)


def _next_runs_match_the_source(both_days: Any, sunset: Any) -> None:
    """The imported entries' next runs are those Celery's own schedules of the source rows
    give from now: Celery's day rule (both day fields must match), Celery's solar code."""
    with core_for(APP) as core:
        now = datetime.now(UTC)
        runs = {info.name: info.next_run for info in core.jobs()}
    pinned = solar(sunset.event, sunset.lat, sunset.lon, nowfun=lambda: now)
    expected = {"both-days": celery_next_run(both_days, now),
                "sunset": now + pinned.remaining_estimate(now)}
    for name, when in expected.items():
        got = runs[name]
        assert got is not None, name
        assert abs((got - when).total_seconds()) <= 1.0, (name, got, when)


def test_disable_source_needs_apply() -> None:
    with pytest.raises(CommandError, match="--disable-source goes with --apply"):
        _command("--disable-source")
