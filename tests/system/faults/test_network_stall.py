"""A runner paused (SIGSTOP) across its lease expiry, then resumed (SIGCONT).

A backup starts attempt 2; on waking the old runner's renewal is refused, its signal
aborts with reason ``lost``, it emits ``lost``, its finish is fenced off; history shows
attempt 1 ``interrupted`` by the frozen instance and attempt 2 ``success`` by the backup.
"""

from __future__ import annotations

import signal

from tests.harness.checks import concurrent_same_slot, events, history
from tests.harness.cluster import first
from tests.system.faults.conftest import LEASE, MakeCluster


def test_stalled_runner_is_replaced_and_told(store_url: str, make_cluster: MakeCluster) -> None:
    cluster = make_cluster(store_url, [dict(kind="at", name="once", when="@go", duration=6.0)])
    cluster.start_deferred("a", "b", "c")
    run1 = cluster.wait_for(first("begin", job="once", attempt=1), 10, "attempt 1")
    stalled = run1["instance"]
    paused = cluster.signal(stalled, signal.SIGSTOP)
    run2 = cluster.wait_for(first("begin", job="once", attempt=2), LEASE + 5, "attempt 2")
    assert run2["instance"] != stalled and run2["reason"] == "takeover"
    assert run2["t"] - paused >= LEASE - 0.3  # not before the lease could have expired
    cluster.signal(stalled, signal.SIGCONT)

    lost = cluster.wait_for(first("event", type="lost", instance=stalled), 5, "lost")
    assert lost["attempt"] == 1
    end1 = cluster.wait_for(first("end", pid=run1["pid"], attempt=1), 5, "the stalled run")
    assert end1["aborted"] and end1["signal"] == "lost"
    cluster.wait_for(first("event", type="success", job="once"), 10, "attempt 2 succeeds")
    records = cluster.records()
    assert [(e["attempt"], e["instance"]) for e in events(records, "success")] == [
        (2, run2["instance"])]

    attempts = {r.attempt: r for r in history(store_url, "once") if not r.manual}
    assert set(attempts) == {1, 2}
    assert attempts[1].status == "interrupted" and attempts[1].instance_id == stalled
    assert attempts[2].status == "success" and attempts[2].instance_id == run2["instance"]
    assert attempts[2].reason == "takeover"
    # the two attempts overlapped only while the stalled one was stopped or noticing
    pairs = concurrent_same_slot(records, "once")
    for a, _b in pairs:
        assert a.pid == run1["pid"] and a.end - lost["t"] < 1.0, pairs
