"""Real ``celery beat`` processes started AFTER entries were stored, in the order users
walk: entries saved (some paused, one deleted), then three beats start; every beat is
restarted after the entries exist (a rolling restart, then all at once); and the redbeat
migration as one journey: redbeat's keys -> ``import-redbeat --apply`` -> three beats ->
Run now -> delete -> save again under the same name -> rolling restart
(:func:`walk_after_import`, also walked by the django-celery-beat migration's test).

Every beat must stay up; each enabled entry is published once per slot; a paused or
deleted one never; Run now once.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from celery import Celery
from celery.schedules import crontab

from anarchon import Scheduler, from_url
from anarchon_celery import Entry
from tests.harness.celery.cluster import (
    BROKER,
    TRANSPORT_OPTIONS,
    CeleryCluster,
    broker_available,
)
from tests.harness.celery.redbeat import redbeat_app, redbeat_keys
from tests.harness.procs import ROOT
from tests.stores.redis import BASE_URL as REDIS_URL
from tests.system.celery.test_beats import SCHEDULER, record, require, store

PULSE = {"pulse": {"task": "t.noop", "every": 1}}
BACKENDS = ["sqlite", "redis", "postgres"]


def journey_app(url: str, queue: str) -> Celery:
    """This process's view of the beats' app: same store, queue and code entries."""
    app = Celery("journey-test", broker=BROKER, set_as_current=False)
    app.conf.update(anarchon_backend=url, anarchon_scheduler=SCHEDULER,
                    task_default_queue=queue, broker_transport_options=TRANSPORT_OPTIONS,
                    timezone="UTC", beat_schedule={
                        "pulse": {"task": "t.noop", "schedule": 1.0}})
    return app


def slots(cluster: CeleryCluster, job: str, after: float = 0.0,
          before: float = float("inf")) -> list[int]:
    return sorted({r["slot"] for r in cluster.records("publish", job=job)
                   if after < r["slot"] / 1000 <= before})


def once_per_slot(cluster: CeleryCluster) -> Counter[tuple[str, int]]:
    per_slot = Counter((r["job"], r["slot"]) for r in cluster.records("publish"))
    assert per_slot and set(per_slot.values()) == {1}, \
        [k for k, n in per_slot.items() if n > 1]
    return per_slot


def all_up(cluster: CeleryCluster, names: list[str]) -> None:
    down = {n: cluster.procs[n].returncode for n in names if cluster.procs[n].poll() is not None}
    assert not down, f"beats exited: {down}; {[cluster.output(n)[-2000:] for n in down]}"


def started(cluster: CeleryCluster, name: str) -> bool:
    return "anarchon_celery: " in cluster.output(name) and "instance" in cluster.output(name)


def start_beats(cluster: CeleryCluster, names: list[str], timeout: float = 60) -> None:
    for name in names:
        cluster.beat(name)
    cluster.wait_for(lambda: all(started(cluster, n) for n in names)
                     or any(cluster.procs[n].poll() is not None for n in names),
                     timeout, f"beats {names} running")
    all_up(cluster, names)


def stop_beat(cluster: CeleryCluster, name: str) -> None:
    proc = cluster.procs[name]
    proc.send_signal(signal.SIGTERM)
    proc.wait(30)
    assert proc.returncode == 0, cluster.output(name)[-2000:]
    (cluster.tmp / f"{name}.out").rename(cluster.tmp / f"{name}.{time.time():.3f}.out")


def contiguous(found: list[int], step: int = 1000) -> bool:
    return bool(found) and found == list(range(found[0], found[-1] + step, step))


@pytest.mark.parametrize("backend", BACKENDS)
def test_beats_start_and_restart_with_stored_entries(tmp_path: Path, backend: str) -> None:
    """Entries stored first (running, paused, deleted, a crontab); then three beats
    start; a rolling restart; every beat stopped and started again."""
    require("the Redis broker", broker_available())
    spec = store(backend)
    require(backend, spec.unavailable())
    ns = "cj_" + uuid.uuid4().hex[:10]
    url = spec.url_for(ns)
    cluster = CeleryCluster(tmp_path, {"queue": ns, "backend": url, "scheduler": SCHEDULER,
                                       "entries": PULSE})
    app = journey_app(url, ns)
    Entry(app, "saved-before", "t.ok", 1).save()
    Entry(app, "every-2", "t.ok", timedelta(seconds=2)).save()
    Entry(app, "minutely", "t.noop", crontab(minute="*")).save()
    Entry(app, "paused", "t.ok", 1, enabled=False).save()
    Entry(app, "deleted", "t.ok", 1).save()
    Entry.load(app, "deleted").delete()
    beats = ["a", "b", "c"]
    marks: dict[str, float] = {}
    try:
        start_beats(cluster, beats)
        marks["up"] = time.time()
        cluster.wait_for(lambda: len(slots(cluster, "saved-before")) >= 5, 30,
                         "five slots of the entry saved before the beats started")
        all_up(cluster, beats)
        # a rolling restart: one beat at a time, the others keep publishing
        marks["rolling"] = time.time()
        for name in beats:
            stop_beat(cluster, name)
            start_beats(cluster, [name])
        marks["rolled"] = time.time()
        cluster.wait_for(lambda: len(slots(cluster, "saved-before", marks["rolled"])) >= 3,
                         30, "slots after the rolling restart")
        # every beat down, then all started again
        for name in beats:
            stop_beat(cluster, name)
        marks["all_down"] = time.time()
        start_beats(cluster, beats)
        marks["restarted"] = time.time()
        cluster.wait_for(lambda: len(slots(cluster, "saved-before", marks["restarted"])) >= 4,
                         30, "slots after every beat restarted")
        cluster.wait_for(lambda: slots(cluster, "minutely"), 70, "a minutely slot")
        all_up(cluster, beats)
        assert not [n for n in beats if "skipped (paused)" in cluster.output(n)], \
            "a paused entry logs a warning every slot"
    finally:
        cluster.stop_all()

    per_slot = once_per_slot(cluster)
    assert not slots(cluster, "paused"), "a paused entry was published"
    assert not slots(cluster, "deleted"), "a deleted entry was published"
    during_roll = slots(cluster, "saved-before", marks["up"] + 1, marks["rolled"])
    assert contiguous(during_roll), f"a slot was lost in the rolling restart: {during_roll}"
    after = slots(cluster, "saved-before", marks["restarted"] + 2.5)
    assert contiguous(after), after
    assert all(s % 2000 == 0 for s in slots(cluster, "every-2"))
    stored = ("saved-before", "every-2", "minutely")
    record(f"journey_stored_entries.{backend}", {
        "slots": {n: len(slots(cluster, n)) for n in stored},
        "publishes": {n: sum(c for (j, _), c in per_slot.items() if j == n) for n in stored},
        "max_per_slot": max(per_slot.values()),
        "beats_publishing": len({r["pid"] for r in cluster.records("publish")
                                 if r["job"] == "saved-before"})})


# -- the documented migrations, end to end -----------------------------------------------

@dataclass
class Walk:
    """One migration's journey after the import: which imported entries it uses, and
    what it measured (wall times of each step, Run now's request -> publish latency)."""

    every: str  #: a 1 s entry: deleted, then saved again under the same name
    hourly: str  #: an hourly entry: Run now
    steady: dict[str, int]  #: entries left alone: name -> period in ms
    marks: dict[str, float] = field(default_factory=dict)
    run_now_s: float = 0.0


def manual_publishes(cluster: CeleryCluster, name: str) -> list[dict[str, Any]]:
    return [r for r in cluster.records("publish", job=name) if r["manual"]]


def run_now(cluster: CeleryCluster, url: str, name: str, timeout: float = 10) -> float:
    """``Scheduler(from_url(url)).trigger(name)`` (what ``anarchon trigger``, ``manage.py
    anarchon trigger`` and the admin's Run now call); returns the request -> publish
    latency in seconds."""
    before = len(manual_publishes(cluster, name))
    requester = Scheduler(from_url(url))
    try:
        asked = time.time()
        requester.trigger(name)
        published = cluster.wait_for(lambda: manual_publishes(cluster, name)[before:],
                                     timeout, f"Run now of {name} published")
    finally:
        requester.close()
    return float(published[0]["t"]) - asked


def walk_after_import(cluster: CeleryCluster, app: Celery, url: str, walk: Walk,
                      beats: list[str]) -> None:
    """After the import: three beats start -> imported entries published -> Run now of
    ``walk.hourly`` -> ``walk.every`` deleted (``Entry.load().delete()``) -> saved again
    under its name (``Entry(...).save()``) -> rolling restart, one beat at a time. Fills
    ``walk.marks`` (``up``, ``deleted``, ``readding``, ``saved``, ``rolling``, ``rolled``)
    and ``walk.run_now_s``; :func:`check_walk` then checks the log."""
    marks = walk.marks
    start_beats(cluster, beats)
    marks["up"] = time.time()
    cluster.wait_for(lambda: len(slots(cluster, walk.every, marks["up"] + 1)) >= 4
                     and all(len(slots(cluster, n, marks["up"] + 1)) >= 2
                             for n in walk.steady), 40, "imported entries published")
    all_up(cluster, beats)
    walk.run_now_s = run_now(cluster, url, walk.hourly)
    Entry.load(app, walk.every).delete()
    marks["deleted"] = time.time()
    # the beats keep ticking (three slots of the code entry) while the deleted one is idle
    cluster.wait_for(lambda: len(slots(cluster, "pulse", marks["deleted"])) >= 3, 20,
                     "three pulse slots after the delete")
    marks["readding"] = time.time()
    Entry(app, walk.every, "t.ok", 1).save()  # at once, under the same name
    marks["saved"] = time.time()
    cluster.wait_for(lambda: len(slots(cluster, walk.every, marks["saved"])) >= 3, 30,
                     "three slots of the entry saved again")
    all_up(cluster, beats)
    marks["rolling"] = time.time()
    for name in beats:
        stop_beat(cluster, name)
        start_beats(cluster, [name])
    marks["rolled"] = time.time()
    cluster.wait_for(lambda: len(slots(cluster, walk.every, marks["rolled"])) >= 3
                     and all(slots(cluster, n, marks["rolled"]) for n in walk.steady),
                     30, "slots after the rolling restart")
    all_up(cluster, beats)


def check_walk(cluster: CeleryCluster, walk: Walk) -> dict[str, Any]:
    """Once per slot all along; Run now published once; nothing of the deleted entry
    between the delete and the new save; no slot lost, during the roll included. Returns
    what to record."""
    marks = walk.marks
    per_slot = once_per_slot(cluster)
    manual = manual_publishes(cluster, walk.hourly)
    assert len(manual) == 1, f"Run now of {walk.hourly} published {len(manual)} times"
    scheduled = [r["slot"] for r in cluster.records("publish", job=walk.hourly)
                 if not r["manual"]]
    assert all(s % 3_600_000 == 0 for s in scheduled), scheduled
    gone = [r for r in cluster.records("publish", job=walk.every)
            if marks["deleted"] < r["t"] < marks["readding"]]
    assert not gone, f"published after the delete returned: {gone}"
    assert not slots(cluster, walk.every, marks["deleted"], marks["readding"]), \
        "a slot of the deleted entry was published"
    before = slots(cluster, walk.every, marks["up"] + 1, marks["deleted"])
    again = slots(cluster, walk.every, marks["saved"] + 1)
    assert contiguous(before), before
    assert contiguous(again), f"a slot of the re-added entry was lost: {again}"
    assert again[0] / 1000 < marks["rolling"] and again[-1] / 1000 > marks["rolled"], \
        (again, marks)
    for name, period in {"pulse": 1000, **walk.steady}.items():
        found = slots(cluster, name, marks["up"] + 1)
        assert contiguous(found, period), f"a slot of {name} was lost: {found}"
        assert found[-1] / 1000 > marks["rolled"], (name, found, marks)
    names = [walk.every, walk.hourly, *walk.steady]
    return {"slots": {n: len(slots(cluster, n)) for n in names},
            "publishes": {n: sum(c for (j, _), c in per_slot.items() if j == n)
                          for n in names},
            "max_per_slot": max(per_slot.values()),
            "run_now_publishes": len(manual), "run_now_latency_s": round(walk.run_now_s, 3),
            "steps_s": {k: round(v - marks["up"], 1) for k, v in marks.items()}}


# -- the redbeat migration, as the docs walk it -------------------------------------------

@pytest.fixture
def redbeat_prefix() -> Iterator[str]:
    pytest.importorskip("redbeat")
    with redbeat_keys("rbj") as made:
        yield made


def _write_redbeat(prefix: str) -> None:
    """redbeat's own entries, saved by redbeat (what a team has before moving)."""
    from redbeat import RedBeatSchedulerEntry

    app = redbeat_app(prefix)
    for name, sched, enabled in (("rb-both", timedelta(seconds=1), True),
                                 ("rb-two", timedelta(seconds=2), True),
                                 ("rb-hourly", timedelta(hours=1), True),
                                 ("rb-off", timedelta(seconds=1), False)):
        RedBeatSchedulerEntry(name, "t.ok", sched, app=app, enabled=enabled).save()


@pytest.mark.parametrize("backend", ["sqlite", "redis"])
def test_redbeat_import_then_three_beats(tmp_path: Path, backend: str,
                                         redbeat_prefix: str) -> None:
    """redbeat keys -> ``python -m anarchon_celery import-redbeat --apply`` -> three
    beats -> every imported entry published once per slot, the disabled one never -> Run
    now -> delete -> save again -> rolling restart (see :func:`walk_after_import`)."""
    require("the Redis broker", broker_available())
    spec = store(backend)
    require(backend, spec.unavailable())
    _write_redbeat(redbeat_prefix)
    ns = "cr_" + uuid.uuid4().hex[:10]
    url = spec.url_for(ns)
    cluster = CeleryCluster(tmp_path, {"queue": ns, "backend": url, "scheduler": SCHEDULER,
                                       "entries": PULSE})
    env = {**cluster_env(cluster), "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "anarchon_celery", "import-redbeat", "-A",
                           "tests.harness.celery.app", "--redis", REDIS_URL,
                           "--key-prefix", redbeat_prefix, "--apply"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "applied: 4 add" in done.stdout and "rb-off" in done.stdout, done.stdout
    journey = Walk(every="rb-both", hourly="rb-hourly", steady={"rb-two": 2000})
    try:
        walk_after_import(cluster, journey_app(url, ns), url, journey, ["a", "b", "c"])
    finally:
        cluster.stop_all()
    measured = check_walk(cluster, journey)
    assert not slots(cluster, "rb-off"), "the disabled redbeat entry was published"
    record(f"journey_redbeat_import.{backend}", measured)


def cluster_env(cluster: CeleryCluster) -> dict[str, Any]:
    import json
    import os

    return {**os.environ, "ANARCHON_CELERY_TEST": json.dumps(cluster.config)}
