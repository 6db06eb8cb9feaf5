"""The django-celery-beat migration as the docs walk it, as one journey with real beats:
django-celery-beat rows -> ``manage.py anarchon import-celery-beat --apply
--disable-source`` -> three ``celery beat -S anarchon_celery:Scheduler`` processes
started afterwards -> every imported entry published once per slot (the old rows are
disabled: if the beats did not start, nothing would run at all) -> Run now of an
imported entry -> one deleted -> saved again under its name -> rolling restart
(``walk_after_import`` of the redbeat journey)."""

from __future__ import annotations

import io
import uuid
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from celery import Celery
from django.core.management import call_command

from tests.harness.celery.cluster import CeleryCluster, broker_available
from tests.system.celery.test_beats import SCHEDULER, record, require, store
from tests.system.celery.test_entries_journeys import (
    PULSE,
    Walk,
    check_walk,
    journey_app,
    slots,
    walk_after_import,
)

pytest.importorskip("django_celery_beat")
pytestmark = [pytest.mark.django_db, pytest.mark.slow]

#: the Celery app the command loads (``--app``), pointed at the test's store
APP: Celery = Celery("import-celery-beat-beats", set_as_current=False)


@pytest.mark.parametrize("backend", ["sqlite", "redis"])
def test_import_celery_beat_then_three_beats(tmp_path: Path, backend: str,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    from django_celery_beat.models import CrontabSchedule, IntervalSchedule, PeriodicTask

    require("the Redis broker", broker_available())
    spec = store(backend)
    require(backend, spec.unavailable())
    ns = "cd_" + uuid.uuid4().hex[:10]
    url = spec.url_for(ns)
    APP.conf.update(anarchon_backend=url, anarchon_scheduler=SCHEDULER, timezone="UTC",
                    beat_schedule={"pulse": {"task": "t.noop", "schedule": 1.0}})
    every_1s = IntervalSchedule.objects.create(every=1, period="seconds")
    every_2s = IntervalSchedule.objects.create(every=2, period="seconds")
    minutely = CrontabSchedule.objects.create(minute="*", hour="*",
                                              timezone=ZoneInfo("Europe/Berlin"))
    PeriodicTask.objects.create(name="dj-every", task="t.ok", interval=every_1s)
    PeriodicTask.objects.create(name="dj-two", task="t.ok", interval=every_2s)
    PeriodicTask.objects.create(name="dj-berlin", task="t.noop", crontab=minutely)
    PeriodicTask.objects.create(name="dj-hourly", task="t.ok", interval=IntervalSchedule
                                .objects.create(every=1, period="hours"))
    PeriodicTask.objects.create(name="dj-off", task="t.ok", interval=every_1s,
                                enabled=False)
    out = io.StringIO()
    call_command("anarchon", "import-celery-beat", "--app",
                 f"{__name__}:APP", "--apply", "--disable-source", stdout=out)
    assert "applied: 5 add" in out.getvalue(), out.getvalue()
    assert not PeriodicTask.objects.filter(name__startswith="dj-", enabled=True).exists()

    # the beats are a plain Celery project (and read their start line at INFO, which the
    # test project's Django LOGGING would hide)
    monkeypatch.delenv("DJANGO_SETTINGS_MODULE")
    cluster = CeleryCluster(tmp_path, {"queue": ns, "backend": url, "scheduler": SCHEDULER,
                                       "entries": PULSE})
    journey = Walk(every="dj-every", hourly="dj-hourly", steady={"dj-two": 2000})
    try:
        walk_after_import(cluster, journey_app(url, ns), url, journey, ["a", "b", "c"])
        # the minutely Berlin crontab: within a minute of the start (the walk takes ~40 s)
        cluster.wait_for(lambda: slots(cluster, "dj-berlin"), 75,
                         "the imported minutely crontab published")
    finally:
        cluster.stop_all()
    measured = check_walk(cluster, journey)
    assert all(s % 60_000 == 0 for s in slots(cluster, "dj-berlin"))
    assert not slots(cluster, "dj-off"), "the disabled row's entry was published"
    measured["slots"]["dj-berlin"] = len(slots(cluster, "dj-berlin"))
    record(f"journey_django_celery_beat_import.{backend}", measured)
