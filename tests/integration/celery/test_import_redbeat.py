"""``python -m anarchon_celery import-redbeat`` on real redbeat keys (written by redbeat's
own ``RedBeatSchedulerEntry(...).save()`` on the rig's Redis) into a real SQLite store."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from celery import Celery
from celery.schedules import crontab, schedule

from anarchon_celery import Entry
from anarchon_celery.__main__ import import_redbeat
from tests.harness.celery.redbeat import redbeat_app, redbeat_keys
from tests.harness.procs import ROOT
from tests.stores.redis import BASE_URL as REDIS_URL
from tests.stores.redis import redis_unavailable
from tests.stores.sqlite import STORE

redbeat = pytest.importorskip("redbeat")
RESULTS = Path(os.environ.get("ANARCHON_IMPORT_TABLES") or "/tmp/anarchon_import_tables.txt")


@pytest.fixture
def prefix() -> Iterator[str]:
    reason = redis_unavailable(REDIS_URL, "ANARCHON_REDIS_URL") if REDIS_URL else "unset"
    if reason:
        pytest.skip(f"Redis not available: {reason}")
    with redbeat_keys("rbt") as made:
        yield made


def _write_redbeat(prefix: str) -> None:
    from redbeat import RedBeatSchedulerEntry

    app = redbeat_app(prefix)

    def save(name: str, sched: Any, **fields: Any) -> Any:
        entry = RedBeatSchedulerEntry(name, fields.pop("task", "proj.work"), sched, app=app,
                                      **fields)
        entry.save()
        return entry

    ran = save("interval", timedelta(seconds=30), args=[1, "x"], kwargs={"full": True},
               options={"queue": "reports", "priority": 5})
    ran.reschedule(datetime(2026, 12, 1, 10, 0, 30, tzinfo=timezone.utc))
    save("relative", schedule(timedelta(minutes=1), relative=True))
    save("nightly", crontab(minute=0, hour=3), options={"expires": 600})
    save("weekday-first", crontab(minute=0, hour=8, day_of_month=1, day_of_week="mon"))
    save("off", timedelta(hours=1), enabled=False)
    save("dated-arg", timedelta(minutes=5),
         kwargs={"since": datetime(2026, 1, 1, tzinfo=timezone.utc)})
    save("code", timedelta(seconds=5))
    save("static", timedelta(seconds=10))
    from redbeat.schedules import rrule

    save("rrule", rrule("MINUTELY", interval=15,
                        dtstart=datetime(2026, 1, 1, tzinfo=timezone.utc)))
    import redis

    client = redis.Redis.from_url(REDIS_URL)
    client.sadd(prefix + ":statics", "static")  # what redbeat's setup_schedule records
    client.close()


def _app() -> Celery:
    app = Celery("anarchon-side", broker="memory://", set_as_current=False)
    app.conf.update(anarchon_backend=STORE.url_for("rb_" + uuid.uuid4().hex[:10]),
                    timezone="UTC",
                    beat_schedule={"code": {"task": "proj.code", "schedule": 5.0}})
    return app


def _run(app: Celery, prefix: str, write: bool) -> str:
    out = io.StringIO()
    assert import_redbeat(app, redis_url=REDIS_URL, key_prefix=prefix, write=write,
                          out=out) == 0
    return out.getvalue()


def _actions(table: str) -> dict[str, str]:
    rows = table.split("\n\n")[0].splitlines()[2:]
    return {line.split()[0]: line.split()[-1] for line in rows}


def test_import_redbeat_dry_run_apply_idempotent(prefix: str) -> None:
    _write_redbeat(prefix)
    app = _app()
    dry = _run(app, prefix, write=False)
    with RESULTS.open("a") as handle:
        handle.write("import-redbeat dry run:\n" + dry + "\n")
    assert _actions(dry) == {
        "code": "refused", "dated-arg": "refused", "interval": "add", "nightly": "add",
        "off": "add", "relative": "add", "rrule": "refused", "static": "refused",
        "weekday-first": "add"}
    assert "last run 2026-12-01T10:00:30+00:00" in dry
    assert "relative=True dropped" in dry
    assert "rrule" in dry and "no every/cron/at equivalent" in dry
    assert "must be JSON to be stored" in dry
    assert "static entry" in dry and "beat_schedule defines this name" in dry
    assert "nothing written" in dry
    assert [e.name for e in Entry.all(app)] == ["code"], "a dry run writes nothing"

    applied = _run(app, prefix, write=True)
    assert "applied: 5 add, 0 update, 0 same, 4 refused" in applied
    stored = {e.name: e for e in Entry.all(app) if not e.read_only}
    assert sorted(stored) == ["interval", "nightly", "off", "relative", "weekday-first"]
    interval = stored["interval"]
    assert (interval.task, interval.schedule, interval.args, interval.kwargs) == (
        "proj.work", timedelta(seconds=30), [1, "x"], {"full": True})
    assert interval.options == {"queue": "reports", "priority": 5}
    assert stored["nightly"].schedule == crontab(minute=0, hour=3)
    assert stored["nightly"].options == {"expires": 600}
    assert not stored["off"].enabled and stored["relative"].schedule == timedelta(minutes=1)
    assert stored["weekday-first"].schedule == crontab(minute=0, hour=8, day_of_month=1,
                                                       day_of_week="mon")

    again = _run(app, prefix, write=True)
    assert "applied: 0 add, 0 update, 5 same, 4 refused" in again
    versions = {e.name: e.version for e in Entry.all(app) if not e.read_only}
    assert set(versions.values()) == {1}, "applying twice changed nothing"


def test_import_redbeat_updates_changed_entries(prefix: str) -> None:
    from redbeat import RedBeatSchedulerEntry

    _write_redbeat(prefix)
    app = _app()
    _run(app, prefix, write=True)
    RedBeatSchedulerEntry("interval", "proj.work", timedelta(seconds=45),
                          app=redbeat_app(prefix)).save()
    dry = _run(app, prefix, write=False)
    assert _actions(dry)["interval"] == "update"
    assert Entry.load(app, "interval").schedule == timedelta(seconds=30)
    _run(app, prefix, write=True)
    assert Entry.load(app, "interval").schedule == timedelta(seconds=45)


def test_command_line(prefix: str, tmp_path: Path) -> None:
    """``python -m anarchon_celery import-redbeat -A …`` in a process of its own."""
    _write_redbeat(prefix)
    url = STORE.url_for("rbc_" + uuid.uuid4().hex[:10])
    env = {**os.environ, "PYTHONPATH": str(ROOT), "ANARCHON_CELERY_TEST": json.dumps(
        {"backend": url, "broker": REDIS_URL, "entries": {}})}
    command = [sys.executable, "-m", "anarchon_celery", "import-redbeat", "-A",
               "tests.harness.celery.app", "--redis", REDIS_URL, "--key-prefix",
               prefix]
    dry = subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True,
                         timeout=60)
    assert dry.returncode == 0, dry.stderr
    assert "dry run (6 add, 0 update, 0 same, 3 refused)" in dry.stdout
    done = subprocess.run([*command, "--apply"], env=env, cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert "applied: 6 add" in done.stdout, done.stdout + done.stderr
    bad = subprocess.run([*command[:5], "no.such.module"], env=env, cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "no.such.module" in bad.stderr
