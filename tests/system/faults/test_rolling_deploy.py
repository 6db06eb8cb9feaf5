"""A rolling deploy: each instance replaced with SIGTERM, one after another (the one
running the job first), while a long job runs. Every SIGTERM of the runner hands the run
over at once (within two heartbeats, reason ``takeover``); the run is never lost, never
runs twice at once, and ends with one success on an instance of the new version."""

from __future__ import annotations

import signal

from tests.harness.checks import begins, concurrent_same_slot, events, history
from tests.harness.cluster import first
from tests.system.faults.conftest import HEARTBEAT, MakeCluster


def test_rolling_deploy_hands_the_long_job_over(store_url: str,
                                                make_cluster: MakeCluster) -> None:
    cluster = make_cluster(store_url, [dict(kind="at", name="export", when="@go",
                                            duration=4.0)])
    cluster.start_deferred("a1", "b1", "c1")
    cluster.wait_for(first("begin", job="export", attempt=1), 10, "attempt 1")
    handovers = []
    remaining = ["a1", "b1", "c1"]
    while remaining:
        records = cluster.records()
        running = [r for r in begins(records, "export") if not any(
            e["kind"] == "end" and e["pid"] == r["pid"] and e["attempt"] == r["attempt"]
            for e in records)]
        # replace the instance running the job first (then the next runner, if it is an old
        # one): the first stop always catches attempt 1, however slow the stops are
        runner = running[-1]["instance"] if running else None
        old = runner if runner in remaining else remaining[0]
        remaining.remove(old)
        new = old[0] + "2"
        sent = cluster.signal(old, signal.SIGTERM)
        cluster.wait_exit(old, 10)
        if running and running[-1]["instance"] == old:
            attempt = running[-1]["attempt"] + 1
            took = cluster.wait_for(first("begin", job="export", attempt=attempt), 5,
                                    f"attempt {attempt} after {old} stopped")
            assert took["reason"] == "takeover"
            handovers.append(took["t"] - sent)
        cluster.start(new)
    done = cluster.wait_for(first("event", type="success", job="export"), 15, "the success")
    records = cluster.records()
    assert done["instance"] in ("a2", "b2", "c2") or len(handovers) < 3
    assert len(events(records, "success", "export")) == 1
    assert not concurrent_same_slot(records, "export")
    assert handovers, "the runner was never replaced"
    # hand-over within two heartbeats (+ process and store latency)
    assert all(delay < 2 * HEARTBEAT + 1.0 for delay in handovers), handovers
    statuses = [r.status for r in history(store_url, "export") if not r.manual]
    assert statuses.count("success") == 1 and "running" not in statuses, statuses
