"""Each publish goes through beat's ``apply_entry`` (what Sentry Crons' Celery beat
integration wraps: ``sentry_sdk/integrations/celery/beat.py`` replaces
``celery.beat.Scheduler.apply_entry`` with a wrapper that adds ``sentry-monitor-*`` headers
to ``entry.options["headers"]`` and calls the original), and "Sending due task" is logged
once per publish, not before every retry. Manual runs skip the lease fence."""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any

import pytest
from celery import Celery, beat
from celery.result import AsyncResult

from anarchon import Aborted, AbortSignal, RunContext
from anarchon.schedules.kinds import ms_to_datetime
from anarchon_celery import Scheduler
from anarchon_celery.tasks.publish import Publisher

SLOT = 1_000


def _ctx(manual: bool = False) -> RunContext:
    return RunContext("tick", SLOT, ms_to_datetime(SLOT), "me", manual, 1,
                      "manual" if manual else "scheduled", AbortSignal(), None)


class _Entry:
    name, task, args, kwargs = "tick", "t.remote", [1], {"k": 2}
    schedule = 5.0


@pytest.fixture
def app() -> Celery:
    made = Celery("apply-entry", set_as_current=False, broker="memory://")
    made.conf.update(anarchon_backend="sqlite:///unused.db", timezone="UTC",
                     beat_schedule={"tick": {"task": "t.remote", "schedule": 5.0}})
    return made


@pytest.fixture
def sent(app: Celery, monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """``app.send_task`` fails ``failures[0]`` times, then records what was sent."""
    calls: list[dict[str, Any]] = []
    failures = [2]

    def send_task(name: str, args: Any = None, kwargs: Any = None, **options: Any) -> Any:
        if failures[0] > 0:
            failures[0] -= 1
            raise ConnectionError("broker down")
        calls.append({"name": name, "args": args, "kwargs": kwargs, **options})
        return AsyncResult(options.get("task_id") or "sent", app=app)

    monkeypatch.setattr(app, "send_task", send_task)
    return calls


@pytest.fixture
def hooked(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Sentry's patch, in its shape: wrap the base class's ``apply_entry``."""
    seen: list[str] = []
    original = beat.Scheduler.apply_entry

    def sentry_like_apply_entry(*args: Any, **kwargs: Any) -> Any:
        scheduler, entry = args[0], args[1]
        assert isinstance(scheduler, beat.Scheduler)
        seen.append(entry.name)
        headers = entry.options.pop("headers", {})
        headers.update({"sentry-monitor-slug": entry.name})
        entry.options["headers"] = headers
        return original(*args, **kwargs)

    monkeypatch.setattr(beat.Scheduler, "apply_entry", sentry_like_apply_entry)
    return seen


def _publisher(app: Celery, scheduler: Any) -> Publisher:
    return Publisher(app, _Entry(), {"queue": "q", "headers": {"mine": 1}}, track=False,
                     queue_lease=60, max_late=3600 * 24 * 365 * 100, beat=scheduler)


def test_publish_goes_through_apply_entry_and_logs_once(
        app: Celery, sent: list[dict[str, Any]], hooked: list[str],
        caplog: pytest.LogCaptureFixture) -> None:
    scheduler = Scheduler(app, lazy=True)
    caplog.set_level(logging.INFO)
    _publisher(app, scheduler)(_ctx())
    assert hooked == ["tick"], "the wrapper of apply_entry saw the publish once"
    assert len(sent) == 1
    headers = sent[0]["headers"]
    assert headers["sentry-monitor-slug"] == "tick" and headers["mine"] == 1
    assert headers["anarchon_job"] == "tick" and headers["anarchon_slot"] == SLOT
    assert sent[0]["queue"] == "q" and sent[0]["args"] == [1]
    lines = [r.getMessage() for r in caplog.records]
    assert sum("Sending due task tick (t.remote)" in line for line in lines) == 1, lines
    assert sum("retrying in" in line for line in lines) == 2, lines
    assert not [line for line in lines if "Message Error" in line]


def test_a_publish_that_never_succeeds_fails_the_run(
        app: Celery, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
        ) -> None:
    """The error reaches the run (recorded as a failure) instead of being swallowed by
    ``apply_entry``."""
    def broken(*_: Any, **__: Any) -> Any:
        raise ConnectionError("broker down")

    monkeypatch.setattr(app, "send_task", broken)
    publisher = Publisher(app, _Entry(), {}, track=False, queue_lease=60, max_late=0.0,
                          beat=Scheduler(app, lazy=True))
    caplog.set_level(logging.INFO)
    with pytest.raises(ConnectionError):
        publisher(_ctx())
    lines = [r.getMessage() for r in caplog.records]
    assert sum("Sending due task" in line for line in lines) == 1


def test_a_manual_run_is_not_fenced_by_a_lease(app: Celery, sent: list[dict[str, Any]]
                                               ) -> None:
    """The core says a manual run holds no lease (``lease_remaining`` is 0.0): it still
    publishes, without a run token; a scheduled run without its lease does not."""
    from types import SimpleNamespace

    no_lease: Any = SimpleNamespace(lease_remaining=lambda *_: 0.0)
    publisher = Publisher(app, _Entry(), {}, track=False, queue_lease=60,
                          max_late=3600 * 24 * 365 * 100, engine=no_lease, lease=0.2,
                          heartbeat=0.05, beat=Scheduler(app, lazy=True))
    publisher(_ctx(manual=True))
    assert len(sent) == 1 and "anarchon_owner" not in sent[0]["headers"]
    with pytest.raises(Aborted):
        publisher(_ctx())
    assert len(sent) == 1


@pytest.mark.parametrize("backend", ["redis", "sqlite"])
def test_real_beats_publish_through_a_wrapped_apply_entry(tmp_path: Any, backend: str
                                                          ) -> None:
    """Three real beats with ``apply_entry`` wrapped as Sentry Crons wraps it: one call
    per publish, for code entries, stored entries, Run now and an entry whose own
    ``is_due`` decides (the shared ``last_run_at`` path) alike, and the wrapper's
    headers reach the message."""
    import time
    import uuid

    from anarchon import Scheduler as CoreScheduler
    from anarchon import from_url
    from anarchon_celery import Entry
    from tests.harness.celery.cluster import CeleryCluster, broker_available
    from tests.system.celery.test_beats import SCHEDULER, require, store
    from tests.system.celery.test_entries_journeys import journey_app, start_beats

    require("the Redis broker", broker_available())
    spec = store(backend)
    require(backend, spec.unavailable())
    ns = "ca_" + uuid.uuid4().hex[:10]
    url = spec.url_for(ns)
    cluster = CeleryCluster(tmp_path, {"queue": ns, "backend": url, "scheduler": SCHEDULER,
                                       "entries": {"pulse": {"task": "t.noop", "every": 1},
                                                   "gated": {"task": "t.gated",
                                                             "custom": "gate", "every": 1}},
                                       "hook_apply_entry": True})
    Entry(journey_app(url, ns), "stored", "t.ok", 1).save()
    Entry(journey_app(url, ns), "hourly", "t.ok", 3600).save()  # only Run now publishes it
    try:
        start_beats(cluster, ["a", "b", "c"])
        cluster.wait_for(lambda: len(cluster.records("publish", job="stored")) >= 4
                         and len(cluster.records("publishing", task="t.gated")) >= 2, 30,
                         "four publishes of the stored entry, two of the gated one")
        requester = CoreScheduler(from_url(url))
        try:
            requester.trigger("hourly")
        finally:
            requester.close()
        cluster.wait_for(lambda: cluster.records("publish", job="hourly"), 10,
                         "the Run now publish")
        time.sleep(1.5)  # let publishes in flight land in the log
    finally:
        cluster.stop_all()
    per_slot = Counter((r["job"], r["slot"]) for r in cluster.records("publish") if r["job"])
    assert per_slot and set(per_slot.values()) == {1}, per_slot  # each slot published once
    publishing = cluster.records("publishing")
    # a shared entry's publish carries no anarchon_* headers (no slot): its name is the hook's
    assert publishing and all(r["hook"] == (r["job"] or "gated") for r in publishing), \
        publishing[:3]
    assert len(cluster.records("publish", job="hourly")) == 1
    for job in ("pulse", "stored", "hourly"):
        calls = len(cluster.records("apply_entry", job=job))
        sends = len(cluster.records("publish", job=job))
        assert calls == sends, (job, calls, sends)
    gated = len(cluster.records("publishing", task="t.gated"))
    assert len(cluster.records("apply_entry", job="gated")) == gated >= 2
    lines = sum(cluster.output(n).count("Scheduler: Sending due task") for n in "abc")
    assert lines == len(cluster.records("publish"))


def test_sentry_crons_monitors_stored_entries(tmp_path: Any) -> None:
    """Sentry's own Celery integration (``monitor_beat_tasks=True``) in a real beat: a
    publish of a stored entry carries Sentry's monitor headers with the entry's schedule
    (a crontab in its own zone, an interval in hours), as a ``beat_schedule`` entry's
    does; the schedule is read from the definition the beat applied, not from the store."""
    import json
    import uuid

    from celery.schedules import crontab

    from anarchon import Scheduler as CoreScheduler
    from anarchon import from_url
    from anarchon_celery import Entry
    from tests.harness.celery.cluster import CeleryCluster, broker_available
    from tests.system.celery.test_beats import SCHEDULER, require, store
    from tests.system.celery.test_entries_journeys import journey_app, start_beats

    pytest.importorskip("sentry_sdk")
    require("the Redis broker", broker_available())
    spec = store("redis")
    require("redis", spec.unavailable())
    ns = "sc_" + uuid.uuid4().hex[:10]
    url = spec.url_for(ns)
    cluster = CeleryCluster(tmp_path, {"queue": ns, "backend": url, "scheduler": SCHEDULER,
                                       "entries": {"code-hourly": {"task": "t.noop",
                                                                   "every": 3600}},
                                       "sentry_crons": True})
    app = journey_app(url, ns)
    Entry(app, "stored-cron", "t.ok", crontab(minute="*/5", hour="3"),
          options={"anarchon": {"timezone": "Europe/Berlin"}}).save()
    Entry(app, "stored-hourly", "t.ok", 7200).save()
    names = ("code-hourly", "stored-cron", "stored-hourly")
    try:
        start_beats(cluster, ["a"])
        requester = CoreScheduler(from_url(url))
        try:
            for name in names:  # Run now: each publishes at once, through apply_entry
                requester.trigger(name)
        finally:
            requester.close()
        cluster.wait_for(lambda: all(cluster.records("publishing", job=n) for n in names),
                         20, "a publish of each entry")
    finally:
        cluster.stop_all()
    seen = {}
    for name in names:
        [record] = cluster.records("publishing", job=name)
        assert record["monitor"] == name, record
        config = record["monitor_config"]
        seen[name] = json.loads(config) if isinstance(config, str) else config
    assert seen["code-hourly"]["schedule"] == {"type": "interval", "value": 1, "unit": "hour"}
    assert seen["stored-hourly"]["schedule"] == {"type": "interval", "value": 2,
                                                 "unit": "hour"}, seen
    # stored as the crontab's expanded fields (the same minutes as */5)
    assert seen["stored-cron"]["schedule"] == {
        "type": "crontab", "value": "0,5,10,15,20,25,30,35,40,45,50,55 3 * * *"}, seen
    assert seen["stored-cron"]["timezone"] == "Europe/Berlin", seen
