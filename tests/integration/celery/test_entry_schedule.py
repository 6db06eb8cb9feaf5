"""``Entry.schedule`` is what Celery code expects (a ``schedule``, a ``crontab`` with its
own zone, a ``solar``), and ``Entry.is_due()``/``remaining_estimate()``/``next_run()``
agree with the stored definition (the next run the store gives), on real stores."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta, timezone
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from celery import Celery
from celery.schedules import crontab, schedule, solar

from anarchon_celery import Entry
from anarchon_celery.entries.entry import core_for
from tests.system.celery.test_beats import require, store

UTC = timezone.utc


@pytest.fixture(params=["sqlite", "redis"])
def app(request: pytest.FixtureRequest) -> Celery:
    spec = store(request.param)
    require(request.param, spec.unavailable())
    made = Celery("entry-schedule", broker="memory://", set_as_current=False)
    made.conf.update(anarchon_backend=spec.url_for("es_" + uuid.uuid4().hex[:10]),
                     timezone="UTC",
                     beat_schedule={"code": {"task": "t.ok", "schedule": 7.0},
                                    "code-cron": {"task": "t.ok",
                                                  "schedule": crontab(minute="*/5")}})
    return made


def _stored_next_runs(app: Celery) -> dict[str, Any]:
    with core_for(app) as core:
        return {info.name: info.next_run for info in core.jobs()}


def test_loaded_schedules_are_celery_schedule_objects(app: Celery) -> None:
    Entry(app, "every", "t", timedelta(seconds=7)).save()
    Entry(app, "berlin", "t", crontab(minute="30", hour="2"),
          options={"anarchon": {"timezone": "Europe/Berlin"}}).save()
    Entry(app, "both-days", "t", crontab(minute="0", hour="8", day_of_month="1",
                                         day_of_week="mon"),
          options={"anarchon": {"timezone": "Europe/Berlin"}}).save()
    Entry(app, "sunset", "t", solar("sunset", 52.5, 13.4)).save()
    every, berlin = Entry.load(app, "every"), Entry.load(app, "berlin")
    assert type(every.schedule) is schedule and every.schedule == timedelta(
        seconds=7)
    # a bare timedelta had no remaining_estimate: a Celery schedule has
    assert isinstance(every.schedule.remaining_estimate(datetime.now(UTC)), timedelta)
    assert type(berlin.schedule) is crontab and str(berlin.schedule.tz) == "Europe/Berlin"
    assert str(Entry.load(app, "both-days").schedule.tz) == "Europe/Berlin"
    assert type(Entry.load(app, "sunset").schedule) is solar
    # Celery's own maths on the loaded crontab is Berlin's wall clock: 02:30 Berlin
    # (``last`` given in the crontab's zone: Celery before 5.7 evaluates a crontab in the
    # zone of the last run it is passed)
    last = datetime(2026, 7, 1, 12, 0, tzinfo=UTC).astimezone(ZoneInfo("Europe/Berlin"))
    due = datetime.now(UTC) + berlin.schedule.remaining_estimate(last)  # from now
    assert abs((due - datetime(2026, 7, 2, 0, 30, tzinfo=UTC)).total_seconds()) < 2
    # saving what was loaded keeps the zone (the crontab carries it)
    berlin.options = {}
    berlin.save()
    assert str(Entry.load(app, "berlin").schedule.tz) == "Europe/Berlin"
    with core_for(app) as core:
        info = next(i for i in core.jobs() if i.name == "berlin")
    assert info.schedule == "cron 30 2 * * * (Europe/Berlin)"
    # code entries too
    code = {e.name: e for e in Entry.all(app) if e.read_only}
    assert type(code["code"].schedule) is schedule


def test_next_run_and_remaining_estimate_agree_with_the_store(app: Celery) -> None:
    Entry(app, "every", "t", 7).save()
    Entry(app, "berlin", "t", crontab(minute="*/10"),
          options={"anarchon": {"timezone": "Europe/Berlin"}}).save()
    Entry(app, "sunset", "t", solar("sunset", 52.5, 13.4)).save()
    Entry(app, "once", "t", datetime.now(UTC) + timedelta(hours=3)).save()
    stored = _stored_next_runs(app)
    for name in ("every", "berlin", "sunset", "once"):
        entry = Entry.load(app, name)
        assert entry.next_run() is not None and stored[name] is not None
        assert abs((entry.next_run() - stored[name]).total_seconds()) < 1.5, name
        estimate = entry.remaining_estimate()
        assert estimate is not None
        assert abs((datetime.now(UTC) + estimate - stored[name]).total_seconds()) < 1.5
    # the interval runs on the UTC grid (as the beats do), not from last_run_at
    every = Entry.load(app, "every")
    nxt = every.next_run()
    assert nxt is not None and nxt.timestamp() % 7 == 0
    # code entries: the beats' conversion
    code = Entry.load(app, "code")
    assert code.read_only and (code.next_run() or nxt).timestamp() % 7 == 0
    cron_next = Entry.load(app, "code-cron").next_run()
    assert cron_next is not None and cron_next.minute % 5 == 0 and cron_next.second == 0


def test_is_due_by_the_stored_definition(app: Celery) -> None:
    Entry(app, "every", "t", 7).save()
    Entry(app, "off", "t", 7, enabled=False).save()
    every, off = Entry.load(app, "every"), Entry.load(app, "off")
    now = datetime.now(UTC)
    due, wait = every.is_due(now - timedelta(seconds=30))
    assert due and 0 < wait <= 7
    due, wait = every.is_due(now + timedelta(seconds=1))  # nothing since: not due
    assert not due and 0 < wait <= 7
    assert not off.is_due(now - timedelta(seconds=30))[0], "a disabled entry is never due"
    assert every.last_run_at is None  # nothing published yet
    assert not every.is_due()[0]
    with pytest.raises(ValueError, match="aware"):
        every.is_due(datetime(2026, 1, 1))


def test_last_run_at_comes_from_the_history(app: Celery) -> None:
    """``load()`` fills ``last_run_at`` with the last published slot (one published by a
    core scheduler offering the handler, as a beat does)."""
    import threading

    from anarchon import Scheduler as CoreScheduler
    from anarchon_celery.beat.config import resolve
    from anarchon_celery.entries.dynamic import HANDLER

    Entry(app, "every", "t", 1).save()
    ran = threading.Event()
    core = CoreScheduler(resolve(app).build_backend(), lease=2, heartbeat=0.3)
    core.handler(HANDLER, lambda ctx: ran.set())
    core.start()
    try:
        assert ran.wait(10)
        deadline = datetime.now(UTC) + timedelta(seconds=10)
        while Entry.load(app, "every").last_run_at is None:
            assert datetime.now(UTC) < deadline, "no last_run_at"
    finally:
        core.stop()
    entry = Entry.load(app, "every")
    assert entry.last_run_at is not None and entry.last_run_at.microsecond == 0
    assert entry.is_due(entry.last_run_at)[0] is (
        datetime.now(UTC) >= entry.last_run_at + timedelta(seconds=1))


def test_a_job_schedule_reads_back_as_the_celery_schedule_it_came_from(tmp_path: Any
                                                                        ) -> None:
    """What a stored entry's publish gives ``apply_entry`` (Sentry Crons reads it): the
    core schedule the beat applied, as the Celery schedule it was saved from."""
    from anarchon import AsyncScheduler, SqliteBackend
    from anarchon.errors import JobNotFoundError
    from anarchon.schedules.kinds import AtSchedule, CronSchedule, EverySchedule
    from anarchon_celery.entries.dynamic import schedule_of_job
    from anarchon_celery.schedules.crontab import CeleryCrontabSchedule
    from anarchon_celery.schedules.solar import CelerySolarSchedule

    berlin = ZoneInfo("Europe/Berlin")
    every = schedule_of_job(EverySchedule(7_200_000))
    assert type(every) is schedule and every == schedule(timedelta(hours=2))
    cron = schedule_of_job(CronSchedule("30 2 * * 1-5", berlin))
    assert type(cron) is crontab and str(cron.tz) == "Europe/Berlin"
    assert cron == crontab(minute="30", hour="2", day_of_week="1-5")
    both = schedule_of_job(CeleryCrontabSchedule("0 3 1 * 1", berlin))
    assert type(both) is crontab and str(both.tz) == "Europe/Berlin"
    assert both == crontab(minute="0", hour="3", day_of_month="1", day_of_week="1")
    sun = schedule_of_job(CelerySolarSchedule("sunrise", 52.5, 13.4))
    assert type(sun) is solar and (sun.event, sun.lat, sun.lon) == ("sunrise", 52.5, 13.4)
    assert schedule_of_job(AtSchedule(1_800_000_000_000)) == datetime(
        2027, 1, 15, 8, 0, tzinfo=UTC)
    # seconds first is not Celery's: its text, as Entry.schedule shows it
    assert schedule_of_job(CronSchedule("*/10 * * * * *", berlin)).startswith("cron ")

    core = AsyncScheduler(SqliteBackend(str(tmp_path / "j.db")))
    core.cron("nightly", "0 2 * * *", lambda ctx: None, timezone="Europe/Berlin")
    assert isinstance(core.job_schedule("nightly"), CronSchedule)
    with pytest.raises(JobNotFoundError, match="'gone'"):
        core.job_schedule("gone")
