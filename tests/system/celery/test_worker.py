"""A real worker records each published slot's real outcome in anarchon's history."""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from celery import Celery
from celery import __version__ as celery_version

from anarchon import RunRecord, Scheduler, from_url
from tests.harness.celery.cluster import (
    BROKER,
    TRANSPORT_OPTIONS,
    CeleryCluster,
    broker_available,
)
from tests.system.celery.test_beats import HEARTBEAT, LEASE, SCHEDULER, require, store

#: when a prefork child dies mid-task, Celery 5.7 sends ``task_failure`` (WorkerLostError)
#: with the task's request, so anarchon can name the run; 5.3-5.6 send it without
CELERY_SIGNALS_LOST_WORKER = tuple(int(p) for p in celery_version.split(".")[:2]) >= (5, 7)



@contextlib.contextmanager
def tracked_cluster(tmp_path: Path, tag: str, entries: Callable[[str], dict[str, Any]]
                    ) -> Iterator[tuple[CeleryCluster, str]]:
    """Beats and workers with outcome tracking on a fresh Redis namespace (``tag_…``);
    ``entries(namespace)`` gives the beat schedule (queues are named after it)."""
    require("the Redis broker", broker_available())
    spec = store("redis")
    require("redis", spec.unavailable())
    ns = tag + "_" + uuid.uuid4().hex[:10]
    url = spec.url_for(ns)
    cluster = CeleryCluster(tmp_path, {"queue": ns, "backend": url, "scheduler": SCHEDULER,
                                       "track": True, "entries": entries(ns)})
    try:
        yield cluster, url
    finally:
        cluster.stop_all()


@pytest.fixture
def tracked(tmp_path: Path) -> Iterator[tuple[CeleryCluster, str]]:
    with tracked_cluster(tmp_path, "cw", lambda ns: {
        "ok": {"task": "t.ok", "every": 2},
        "boom": {"task": "t.boom", "every": 2},
        # the retry waits 2 s: long enough to see the note while the run is running
        "retry": {"task": "t.retry_once", "every": 3, "kwargs": {"countdown": 2}},
        "revoke": {"task": "t.ok", "every": 4, "options": {"countdown": 2.5}},
        "hang": {"task": "t.hang", "every": HANG_EVERY, "options": {
            **REPUBLISH, "queue": ns + "-hang"}},
        "overlap": {"task": "t.ok", "every": 1, "kwargs": {"seconds": 2.5},
                    "options": {"queue": ns + "-overlap"}},
    }) as made:
        yield made


#: a lost worker's run is published again only when the entry asks for it
REPUBLISH: dict[str, Any] = {"anarchon": {"republish": True}}
#: the "hang" entries' interval: a killed run's takeover (lease + a heartbeat after the
#: kill) must come before the next slot, whose claim would replace the expired run
HANG_EVERY = 10


def just_after_a_hang_slot(cluster: CeleryCluster) -> None:
    """Wait until a "hang" slot has just passed, so a kill now is taken over (within
    LEASE + HEARTBEAT) long before the next slot is claimed."""
    cluster.wait_for(lambda: 0.5 <= time.time() % HANG_EVERY < 1.5, HANG_EVERY + 2,
                     "the second after a hang slot")


def history(url: str, name: str) -> list[RunRecord]:
    reader = Scheduler(from_url(url))
    try:
        return reader.history(name, 50)
    finally:
        reader.close()


def wait_history(cluster: CeleryCluster, url: str, name: str, check: Any, what: str
                 ) -> list[RunRecord]:
    return list(cluster.wait_for(lambda: (h := history(url, name)) and check(h) and h, 40,
                                 what))


def test_outcomes_from_a_real_worker(tracked: tuple[CeleryCluster, str]) -> None:
    cluster, url = tracked
    queue = cluster.config["queue"]
    cluster.worker("w", queue)
    cluster.worker("hang1", queue + "-hang")
    cluster.worker("over", queue + "-overlap", pool="threads", concurrency=4)
    cluster.beat("a")
    cluster.beat("b")

    # revoke the first "revoke" message while it waits for its countdown
    first = cluster.wait_for(lambda: cluster.records("publish", job="revoke"), 30,
                             "the revoke entry's publish")[0]
    control = Celery("control", broker=BROKER, set_as_current=False)
    control.conf.broker_transport_options = TRANSPORT_OPTIONS
    control.control.revoke(first["id"])
    control.close()

    ok = wait_history(cluster, url, "ok", lambda h: any(r.status == "success" for r in h),
                      "a success")
    done = next(r for r in ok if r.status == "success")
    assert done.duration is not None and done.duration >= 0 and done.error is None
    boom = wait_history(cluster, url, "boom",
                        lambda h: any(r.status == "failure" for r in h), "a failure")
    assert "RuntimeError: boom" in (next(r for r in boom if r.status == "failure").error or "")
    # while the retry waits, the run stays "running" (docs/contract.md, *History and
    # events*) and notes why
    noting = wait_history(cluster, url, "retry", lambda h: any(
        r.status == "running" and r.error for r in h), "a retrying run noted in history")
    noted = next(r for r in noting if r.status == "running" and r.error)
    assert noted.error == "retrying: ConnectionError: flaky"
    assert noted.finished_at is None
    retry = wait_history(cluster, url, "retry", lambda h: any(
        r.slot == noted.slot and r.status == "success" for r in h),
        "the noted run's success")
    retried = next(r for r in retry if r.slot == noted.slot and r.status == "success")
    assert retried.attempt == 1  # retry() keeps the same run (same headers)
    assert retried.error is None  # the success cleared the note
    runs = cluster.records("run", job="retry", slot=retried.slot)
    assert sorted(r["retries"] for r in runs) == [0, 1]
    revoked = wait_history(cluster, url, "revoke", lambda h: any(
        r.slot == first["slot"] and r.status == "interrupted" for r in h), "the revoke")
    assert next(r for r in revoked if r.slot == first["slot"]).error == "revoked"
    # the worker log says it too
    assert "retrying: ConnectionError: flaky" in cluster.output("w")
    # the CLI shows the reason next to the status
    shown = subprocess.run([sys.executable, "-m", "anarchon", "history", "revoke",
                            "--backend", url, "--count", "50"], capture_output=True,
                           text=True, check=True, timeout=60).stdout
    assert any("interrupted" in line and line.rstrip().endswith("revoked")
               for line in shown.splitlines()), shown

    # the worker running "hang" is killed mid-task: a beat publishes attempt 2 after the
    # lease, a new worker runs it
    hung = cluster.wait_for(lambda: cluster.records("run", job="hang", attempt=1), 30,
                            "the hang task running")[0]
    just_after_a_hang_slot(cluster)
    killed = cluster.kill("hang1")
    cluster.worker("hang2", queue + "-hang")
    hang = wait_history(cluster, url, "hang", lambda h: any(
        r.slot == hung["slot"] and r.attempt == 2 and r.status == "success" for r in h),
        "attempt 2 of the killed run")
    first_attempt = next(r for r in hang if r.slot == hung["slot"] and r.attempt == 1)
    assert first_attempt.status == "interrupted"
    second = cluster.records("publish", job="hang", slot=hung["slot"], attempt=2)
    assert second and second[0]["t"] - killed < LEASE + 2 * HEARTBEAT + 3

    # overlap="skip": a 2.5 s task on a 1 s schedule never runs twice at once
    def finished_spans() -> list[tuple[float, float]]:
        runs = cluster.records("run", job="overlap")
        dones = {r["slot"]: r["t"] for r in cluster.records("done", job="overlap")}
        return sorted((r["t"], dones[r["slot"]]) for r in runs if r["slot"] in dones)

    spans = cluster.wait_for(lambda: s if len(s := finished_spans()) >= 2 else None, 30,
                             "two finished overlap runs")
    assert all(later[0] >= earlier[1] for earlier, later in itertools.pairwise(spans)), spans
    # read history first: every run it shows finished has its "done" record by the time
    # the log is read again, and skip allows at most one more slot (queued or running)
    overlap = history(url, "overlap")
    ran = {r.slot for r in overlap if r.status != "skipped"}
    assert len(ran) <= len(finished_spans()) + 1
    # the slots given up meanwhile are history records, never of a slot that ran
    skipped = [r for r in overlap if r.status == "skipped"]
    assert skipped and {(r.reason, r.attempt) for r in skipped} == {("overlap", 0)}, overlap
    assert not {r.slot for r in skipped} & ran


@pytest.fixture
def prefork(tmp_path: Path) -> Iterator[tuple[CeleryCluster, str]]:
    with tracked_cluster(tmp_path, "cp", lambda ns: {
        "ok": {"task": "t.ok", "every": 2},
        "boom": {"task": "t.boom", "every": 2},
        "hang": {"task": "t.hang", "every": HANG_EVERY, "options": {
            **REPUBLISH, "queue": ns + "-hang"}},
    }) as made:
        yield made


def test_outcomes_under_the_prefork_pool(prefork: tuple[CeleryCluster, str]) -> None:
    """``--pool prefork``: tasks run in forked pool processes, which open their own store
    connections; success and failure are recorded. A pool process killed mid-task
    (Celery reports ``WorkerLostError``) is not a task failure: attempt 1 ends
    ``interrupted`` and a beat publishes attempt 2 after the lease, which a new pool
    process runs."""
    cluster, url = prefork
    queue = cluster.config["queue"]
    cluster.worker("w", queue, pool="prefork", concurrency=2)
    cluster.worker("hw", queue + "-hang", pool="prefork", concurrency=1)
    cluster.beat("a")
    cluster.beat("b")

    ok = wait_history(cluster, url, "ok", lambda h: any(r.status == "success" for r in h),
                      "a success")
    done = next(r for r in ok if r.status == "success")
    assert done.duration is not None and done.duration >= 0 and done.error is None
    boom = wait_history(cluster, url, "boom",
                        lambda h: any(r.status == "failure" for r in h), "a failure")
    assert "RuntimeError: boom" in (next(r for r in boom if r.status == "failure").error or "")
    # they ran in pool processes, not in the worker's main process
    ran = {r["pid"] for r in cluster.records("run") if r["job"] in ("ok", "boom")}
    assert ran and cluster.procs["w"].pid not in ran

    hung = cluster.wait_for(lambda: cluster.records("run", job="hang", attempt=1), 30,
                            "the hang task running in a pool process")[0]
    assert hung["pid"] != cluster.procs["hw"].pid
    just_after_a_hang_slot(cluster)
    os.kill(hung["pid"], signal.SIGKILL)
    killed = time.time()
    hang = wait_history(cluster, url, "hang", lambda h: any(
        r.slot == hung["slot"] and r.attempt == 2 and r.status == "success" for r in h),
        "attempt 2 of the run whose pool process was killed")
    attempts = {r.attempt: r for r in hang if r.slot == hung["slot"]}
    assert attempts[1].status == "interrupted", attempts[1]
    second = cluster.records("publish", job="hang", slot=hung["slot"], attempt=2)
    assert second and second[0]["t"] - killed < LEASE + 2 * HEARTBEAT + 3
    rerun = cluster.records("run", job="hang", slot=hung["slot"], attempt=2)
    assert rerun and rerun[0]["pid"] not in (hung["pid"], cluster.procs["hw"].pid)
    assert cluster.procs["hw"].poll() is None  # the worker itself lives on
    assert "WorkerLostError" in cluster.output("hw")  # Celery saw it as a lost process
    if CELERY_SIGNALS_LOST_WORKER:
        assert f"hang slot {hung['slot']} attempt 1: the pool process running it was " \
            "lost" in cluster.output("hw")
    # and anarchon did not record it as the task's failure
    assert not any(r.status == "failure" for r in hang if r.slot == hung["slot"])
