"""Run now (``trigger()``) of a plain job with three real worker processes: each request
runs exactly once, on one instance, within a second or two (at once where the store has a
wake-up channel, else at the next poll), and history holds one ``manual`` record with the
run's real outcome (success), never a failure for a run that did not happen."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from anarchon import Scheduler, from_url
from tests.harness.cluster import JobCluster

OPTIONS = dict(lease=2.0, heartbeat=0.3, jitter=0.1)
#: every hour: no scheduled slot comes near the test
JOB = dict(kind="every", name="report", when="1h", duration=0.2)
Lines = list[dict[str, Any]]


@pytest.fixture
def cluster(store_url: str, tmp_path: Path) -> Iterator[JobCluster]:
    made = JobCluster(store_url, tmp_path / "log.jsonl", JOB, OPTIONS)
    yield made
    made.stop_all()


def manual_begins(lines: Lines) -> Lines:
    return [r for r in lines if r["kind"] == "begin" and r["reason"] == "manual"]


def test_run_now_runs_once_and_records_the_outcome(cluster: JobCluster, store_url: str) -> None:
    cluster.start("a", "b", "c")
    controller = Scheduler(from_url(store_url), instance_id="controller")
    latencies = []
    try:
        for n in range(3):
            asked = time.time()
            controller.trigger("report", data={"n": n})

            def begun(lines: Lines, n: int = n) -> Lines:
                found = manual_begins(lines)
                return found if len(found) > n else []

            latencies.append(cluster.wait_for(begun, 10, f"Run now #{n + 1}")[n]["t"] - asked)

            def finished(_: Lines, n: int = n) -> list[Any]:
                done = [r for r in controller.history("report", 10)
                        if r.status != "running"]
                return done if len(done) > n else []

            cluster.wait_for(finished, 10, f"the outcome of Run now #{n + 1}")
        settled = time.time() + 2 * OPTIONS["lease"] + 0.5  # a takeover would run by then
        cluster.wait_for(lambda _: time.time() > settled, 10, "two leases")
        records = controller.history("report", 10)
    finally:
        controller.close()
    begins = manual_begins(cluster.records())
    assert len(begins) == 3, begins
    assert [(r.reason, r.status, r.attempt) for r in records] == [("manual", "success", 1)] * 3
    print(f"{store_url.split(':')[0]}: Run now request -> handler start (s): "
          f"{[round(x, 3) for x in latencies]}")
    assert max(latencies) < 3.0, latencies
