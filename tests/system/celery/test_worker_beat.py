"""``celery worker -B``: ``-S anarchon`` (the worker's ``--statedb``) is refused with a
message naming ``--scheduler``; ``--scheduler anarchon`` runs anarchon's beat in every
worker, each slot published once."""

from __future__ import annotations

import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from anarchon_celery.beat.embedded import check_worker_options, is_anarchon_scheduler
from tests.harness.celery.cluster import CeleryCluster, broker_available
from tests.system.celery.test_beats import SCHEDULER, record, require, store


def test_check_worker_options() -> None:
    conf: dict[str, Any] = {"beat_scheduler": "celery.beat:PersistentScheduler"}
    refused = check_worker_options({"beat": True, "statedb": "anarchon"}, conf)
    assert refused is not None and "--scheduler anarchon" in refused and "--statedb" in refused
    assert check_worker_options({"beat": True, "statedb": "/x/anarchon_celery:Scheduler"},
                                conf) is not None
    assert check_worker_options({"beat": False, "statedb": "anarchon"}, conf) is None
    assert check_worker_options({"beat": True, "statedb": "anarchon",
                                 "scheduler": "anarchon"}, conf) is None
    assert check_worker_options({"beat": True, "statedb": "anarchon"},
                                {"beat_scheduler": "anarchon_celery:Scheduler"}) is None
    assert check_worker_options({"beat": True, "statedb": "worker.state"}, conf) is None
    from anarchon_celery import Scheduler

    assert is_anarchon_scheduler(Scheduler) and is_anarchon_scheduler("anarchon")
    assert not is_anarchon_scheduler("django") and not is_anarchon_scheduler(None)


def test_the_celery_command_shows_the_scheduler_and_the_store(tmp_path: Path) -> None:
    cluster = CeleryCluster(tmp_path, {"backend": "sqlite:///" + str(tmp_path / "s.db")})
    proc = cluster.spawn("cmd", ["anarchon"])
    assert proc.wait(60) == 0, cluster.output("cmd")
    out = cluster.output("cmd")
    assert "beat_scheduler: celery.beat:PersistentScheduler (not anarchon's" in out, out
    assert "anarchon store: " in out and "sqlite" in out, out


def test_worker_dash_b_dash_s_anarchon_is_refused(tmp_path: Path) -> None:
    require("the Redis broker", broker_available())
    cluster = CeleryCluster(tmp_path, {"queue": "cw_" + uuid.uuid4().hex[:10],
                                       "entries": {"tick": {"task": "t.noop", "every": 1}}})
    proc = cluster.worker("w", cluster.config["queue"], extra=["-B", "-S", "anarchon"])
    try:
        code = proc.wait(60)
    finally:
        cluster.stop_all()
    out = cluster.output("w")
    assert code != 0, out
    assert "-S is --statedb" in out and "--scheduler anarchon" in out, out[-3000:]
    assert not cluster.records("publish"), "stock beat published"


@pytest.mark.parametrize("backend", ["redis"])
def test_workers_dash_b_with_scheduler_anarchon_publish_once(tmp_path: Path,
                                                            backend: str) -> None:
    require("the Redis broker", broker_available())
    spec = store(backend)
    require(backend, spec.unavailable())
    ns = "cw_" + uuid.uuid4().hex[:10]
    cluster = CeleryCluster(tmp_path, {"queue": ns, "backend": spec.url_for(ns),
                                       "scheduler": SCHEDULER,
                                       "entries": {"tick": {"task": "t.noop", "every": 1}}})
    try:
        for name in ("w1", "w2"):
            cluster.worker(name, ns, extra=["-B", "--scheduler", "anarchon",
                                            "-s", str(tmp_path / f"{name}-schedule")])
        cluster.wait_for(lambda: len({r["slot"] for r in cluster.records("publish")}) >= 8,
                         60, "eight slots")
        time.sleep(1.0)
    finally:
        cluster.stop_all()
    per_slot = Counter(r["slot"] for r in cluster.records("publish", job="tick"))
    assert set(per_slot.values()) == {1}, per_slot
    record("worker_dash_b_scheduler_anarchon.redis", {"slots": len(per_slot),
                                                      "max_per_slot": max(per_slot.values())})
