"""Issue 15, finding 5: an ``async def`` handler that blocks its event loop for 10 s.

Three instances, lease 2 s, heartbeat 0.3 s; one run of a job whose handler calls
``time.sleep(10)`` inside ``async def``. What users rely on: the lease does not depend on
handler code, so the run has exactly one attempt (no takeover, never two copies at
once), it ends in one ``success``, the "event loop blocked" warning names the job *while*
the handler blocks (not after), and every instance is still running.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import _require
from tests.harness.cluster import Cluster, Records, first
from tests.harness.faults import INSTANCES, LEASE, begins, logs, make_workers
from tests.stores import StoreSpec
from tests.system.faults.conftest import long_stores

JOB = "blocking-export"  # distinctive: a warning naming it cannot match by accident
BLOCK = 10.0


@pytest.fixture(params=long_stores(), ids=lambda s: s.id)
def lease_store(request: pytest.FixtureRequest) -> StoreSpec:
    """The long fault tests' stores (see :func:`tests.system.faults.conftest.long_stores`)."""
    spec: StoreSpec = request.param
    _require(spec)
    return spec


def most_concurrent(records: Records, now: float) -> tuple[int, float]:
    """Most copies of :data:`JOB` executing at once, and for how long two or more did."""
    spans = []
    for begin in begins(records, JOB):
        end = next((r["t"] for r in records if r["kind"] == "end" and r["job"] == JOB
                    and r["pid"] == begin["pid"] and r["attempt"] == begin["attempt"]), now)
        spans.append((begin["t"], end))
    edges = sorted([(b, 1) for b, _ in spans] + [(e, -1) for _, e in spans])
    peak = running = 0
    overlap, since = 0.0, 0.0
    for t, step in edges:
        if running >= 2:
            overlap += t - since
        running += step
        since = t
        peak = max(peak, running)
    return peak, overlap


def test_blocking_async_handler_delays_only_itself(store_url: str, clusters: list[Cluster],
                                                   tmp_path: Path,
                                                   request: pytest.FixtureRequest) -> None:
    cluster = make_workers(clusters, store_url, tmp_path, [
        dict(kind="at", name=JOB, when="@go", duration=BLOCK, blocking=True)])
    cluster.start_deferred(*INSTANCES)
    run1 = cluster.wait_for(first("begin", job=JOB, attempt=1), 10, "attempt 1")
    end1 = cluster.wait_for(first("end", job=JOB, pid=run1["pid"]), BLOCK + 10,
                            "the blocked handler's end")
    # a takeover or a lost/success report would come within a lease after the unblock
    cluster.wait_for(lambda lines: time.time() > end1["t"] + LEASE + 1, LEASE + 5,
                     "a lease after the handler unblocked")
    records = cluster.records()
    peak, overlap = most_concurrent(records, time.time())
    warnings = [r for r in logs(records) if r["instance"] == run1["instance"]
                and JOB in r["msg"]]
    during = [r for r in warnings if run1["t"] < r["t"] < end1["t"]]
    found: dict[str, Any] = dict(
        attempts=sorted({r["attempt"] for r in begins(records, JOB)}),
        concurrent=peak, overlap_s=round(overlap, 1),
        takeovers=len([r for r in begins(records, JOB) if r["reason"] == "takeover"]),
        successes=len([r for r in records if r["kind"] == "event" and r["type"] == "success"
                       and r["job"] == JOB]),
        lost_events=len([r for r in records if r["kind"] == "event" and r["type"] == "lost"]),
        warning_naming_job_s=(round(during[0]["t"] - run1["t"], 1) if during else
                              f"none while blocked; after: "
                              f"{[round(r['t'] - end1['t'], 1) for r in warnings]}"),
        dead=cluster.dead())
    print(f"\nBLOCKING {request.node.callspec.id} {found}")
    problems = [f"{key}: {found[key]}" for key, bad in (
        ("attempts", found["attempts"] != [1]), ("concurrent", peak > 1),
        ("successes", found["successes"] != 1), ("warning_naming_job_s", not during),
        ("dead", bool(found["dead"]))) if bad]
    assert not problems, f"{problems}; figures: {found}"
