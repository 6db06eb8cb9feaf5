"""A tracked task that waits in the queue is never published twice by default.

Three real beats track outcomes and no worker runs: every task stays queued past
``queue_lease`` (2 s). The default publishes each slot once and logs the configuration
error (no worker ever reported an outcome); an entry with ``republish: True`` gets
attempt 2 after ``queue_lease``, as before.
"""

from __future__ import annotations

import uuid
from collections import Counter
from pathlib import Path

import pytest

from anarchon import Scheduler, from_url
from tests.harness.celery.cluster import CeleryCluster, broker_available, queue_length
from tests.system.celery.test_beats import require, store

QUEUE_LEASE = 2.0
SCHEDULER = {"lease": 2.0, "heartbeat": 0.3, "jitter": 0.2}


@pytest.mark.parametrize("backend", ["redis", "postgres"])
def test_a_queued_task_is_not_republished(tmp_path: Path, backend: str) -> None:
    require("the Redis broker", broker_available())
    spec = store(backend)
    require(backend, spec.unavailable())
    ns = "cq_" + uuid.uuid4().hex[:10]
    cluster = CeleryCluster(tmp_path, {
        "queue": ns, "backend": spec.url_for(ns), "scheduler": SCHEDULER, "track": True,
        "queue_lease": QUEUE_LEASE, "entries": {
            "tick": {"task": "t.ok", "every": 1},
            "again": {"task": "t.ok", "every": 5,
                      "options": {"anarchon": {"republish": True}}}}})
    try:
        for name in ("a", "b", "c"):
            cluster.beat(name)
        first = cluster.wait_for(lambda: cluster.records("publish", job="tick"), 60,
                                 "a first publish")[0]

        def error_logged() -> bool:
            return any("configuration error" in cluster.output(n) for n in ("a", "b", "c"))

        cluster.wait_for(error_logged, QUEUE_LEASE + 15, "the configuration error")
        cluster.wait_for(lambda: cluster.records("publish", job="again", attempt=2), 20,
                         "attempt 2 of the entry that asks for it")
    finally:
        cluster.stop_all()
    ticks = cluster.records("publish", job="tick")
    assert {r["attempt"] for r in ticks} == {1}, "a queued task was published again"
    assert set(Counter(r["slot"] for r in ticks).values()) == {1}
    outputs = "".join(cluster.output(n) for n in ("a", "b", "c"))
    line = next(x for x in outputs.splitlines() if "configuration error" in x)
    assert "ERROR" in line and "'tick'" in line and "track_outcomes(app)" in line, line
    assert f"slot {first['slot']}" in outputs
    reader = Scheduler(from_url(str(cluster.config["backend"])))
    try:
        history = reader.history("tick", 50)
    finally:
        reader.close()
    first_run = next(r for r in history if r.slot == first["slot"])
    assert (first_run.attempt, first_run.status) == (1, "interrupted")
    assert queue_length(ns) == len(cluster.records("publish"))
