"""Run now (``Scheduler(from_url(url)).trigger(name)``, what ``manage.py anarchon trigger``
and the admin's Run now call) of Celery entries, with three real beats and a real worker:
exactly one message is published within a second or two of the request (by any beat);
the manual record is the publish (no tracking) or the task's real outcome (tracking); a
run that did not happen is never recorded as a failure.
"""

from __future__ import annotations

import re
import statistics
import time
import uuid
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from anarchon import RunRecord, Scheduler, from_url
from anarchon_celery import Entry
from tests.harness.celery.cluster import CeleryCluster, broker_available
from tests.system.celery.test_beats import LEASE, SCHEDULER, record, require, store
from tests.system.celery.test_entries_journeys import (
    all_up,
    journey_app,
    start_beats,
)

ENTRIES = {"pulse": {"task": "t.noop", "every": 1},
           "hourly": {"task": "t.ok", "every": 3600},
           "hourly-boom": {"task": "t.boom", "every": 3600}}
#: requests per entry (one after the other: one manual run at a time)
ROUNDS = 3


def manual_records(url: str, name: str) -> list[RunRecord]:
    reader = Scheduler(from_url(url))
    try:
        return [r for r in reader.history(name, 50) if r.manual]
    finally:
        reader.close()


def new_publishes(cluster: CeleryCluster, name: str, before: int) -> list[dict[str, Any]]:
    return cluster.records("publish", job=name)[before:]


def finished_manual(url: str, name: str, count: int) -> bool:
    return len([m for m in manual_records(url, name) if m.status != "running"]) >= count


@pytest.mark.parametrize("track", [False, True], ids=["publish", "tracked"])
@pytest.mark.parametrize("backend", ["sqlite", "redis", "postgres"])
def test_run_now_publishes_once(tmp_path: Path, backend: str, track: bool) -> None:
    require("the Redis broker", broker_available())
    spec = store(backend)
    require(backend, spec.unavailable())
    ns = "cn_" + uuid.uuid4().hex[:10]
    url = spec.url_for(ns)
    cluster = CeleryCluster(tmp_path, {"queue": ns, "backend": url, "scheduler": SCHEDULER,
                                       "entries": ENTRIES, "track": track})
    app = journey_app(url, ns)
    # a stored entry, saved before the beats start (what an import leaves)
    Entry(app, "stored-hourly", "t.ok", 3600).save()
    beats = ["a", "b", "c"]
    latencies: list[float] = []
    names = ["hourly", "stored-hourly", "hourly-boom"]
    try:
        cluster.worker("w", ns)
        start_beats(cluster, beats)
        cluster.wait_for(lambda: cluster.records("run", task="t.noop"), 30,
                         "the worker running the pulse")
        requester = Scheduler(from_url(url))
        try:
            for round_ in range(ROUNDS):
                for name in names:
                    before = len(cluster.records("publish", job=name))
                    asked = time.time()
                    requester.trigger(name)
                    published = cluster.wait_for(partial(new_publishes, cluster, name, before),
                                                 10, f"Run now of {name} published")
                    latencies.append(published[0]["t"] - asked)
                    cluster.wait_for(partial(finished_manual, url, name, round_ + 1), 30,
                                     f"the manual run of {name} recorded")
            # the old failure came after 2 x lease: wait that long for a late record
            time.sleep(2 * LEASE + 1)
        finally:
            requester.close()
        all_up(cluster, beats)
    finally:
        cluster.stop_all()

    for name in names:
        published = cluster.records("publish", job=name)
        assert len(published) == ROUNDS, (name, published)
        assert len({r["slot"] for r in published}) == ROUNDS
        manual = manual_records(url, name)
        assert len(manual) == ROUNDS, manual
        expected = "failure" if (track and name == "hourly-boom") else "success"
        assert {m.status for m in manual} == {expected}, manual
        if expected == "failure":
            assert all("boom" in (m.error or "") for m in manual), manual
    ran = {r["id"] for r in cluster.records("run")}
    for name in names:
        assert {r["id"] for r in cluster.records("publish", job=name)} <= ran, \
            f"the worker did not run every manual publish of {name}"
    # the stop may hand a slot due at that instant over ("no longer holds the slot
    # (stop)"); any other reason means a publish was refused while the beat ran
    refused = re.compile(r"no longer holds the slot \((?!stop\))")
    for name in beats:
        assert not refused.findall(cluster.output(name)), name
    assert max(latencies) < 2.0, latencies
    record(f"run_now_latency.{backend}.{'tracked' if track else 'publish'}", {
        "requests": len(latencies), "median_s": round(statistics.median(latencies), 3),
        "max_s": round(max(latencies), 3),
        "publishing_beats": len({r["pid"] for n in names
                                 for r in cluster.records("publish", job=n)})})
