"""A Redis failover, to a replica that missed the claim and to one in sync.

Our own primary and replica (no persistence) on loopback; the instances reach "the
primary" through a small TCP proxy (:class:`SwitchProxy`), as clients reach a failover
address. Just before the slot the replica stops replicating (``REPLICAOF NO ONE``: from
then on it is behind by every write, the claim included); the primary is ``kill -9``-ed
while the run executes and the proxy sends every connection to the replica from then on
(the promotion). The runner's next renewal finds no record of its run: the store forgot
it, nobody else holds it. Expected (docs/backends/redis.md, "Failover and
replication"): the runner aborts the handler (``lost``) and claims the slot again once it
has stopped; the slot runs again exactly once, cluster-wide, and succeeds. With the
replica in sync (caught up, then promoted) the run goes on untouched: one start, one
success.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.harness.checks import begins, decided_again, events, history, told_gone
from tests.harness.cluster import Cluster, first
from tests.harness.faults import make_workers
from tests.harness.proxies import SwitchProxy
from tests.harness.servers import HOST, RedisLike
from tests.stores.redis import url_with_prefix
from tests.system.faults.conftest import missing

LEASE, HEARTBEAT = 2.0, 0.3


def _cli(port: int, *args: str) -> str:
    done = subprocess.run(["redis-cli", "-h", HOST, "-p", str(port), *args],
                          capture_output=True, text=True, timeout=10, check=True)
    return done.stdout.strip()


def _offset(port: int, field: str) -> int:
    for line in _cli(port, "INFO", "replication").splitlines():
        if line.startswith(field + ":"):
            return int(line.split(":", 1)[1])
    return 0


@pytest.mark.parametrize("behind", [True, False], ids=["replica-behind", "replica-in-sync"])
def test_a_failover_runs_the_slot_once(tmp_path: Path, namespace: str,
                                       clusters: list[Cluster], behind: bool) -> None:
    """Behind: the claim is lost with the primary, the slot is decided again and runs once
    more. In sync: the promoted replica has the claim, the run goes on untouched."""
    binary, cli = shutil.which("redis-server"), shutil.which("redis-cli")
    if binary is None or cli is None:
        missing("redis-server and redis-cli")
    assert binary is not None
    (tmp_path / "p").mkdir()
    (tmp_path / "r").mkdir()
    primary = RedisLike(binary, tmp_path / "p", aof=False, sigkill=True)
    replica = RedisLike(binary, tmp_path / "r", aof=False, sigkill=True)
    proxy = SwitchProxy(primary.port)
    try:
        _cli(replica.port, "REPLICAOF", HOST, str(primary.port))
        deadline = time.monotonic() + 15
        while "master_link_status:up" not in _cli(replica.port, "INFO", "replication"):
            assert time.monotonic() < deadline, "the replica never synced"
            time.sleep(0.05)
        url = url_with_prefix(f"redis://{HOST}:{proxy.port}/0", namespace)
        cluster = make_workers(clusters, url, tmp_path, [
            dict(kind="at", name="once", when="@go", duration=6.0,
                 options=dict(max_late=60))], lease=LEASE, heartbeat=HEARTBEAT, jitter=0.1)
        when = cluster.start_deferred("a", "b", "c", lead=3.0)
        _caught_up(primary.port, replica.port)  # the jobs' registrations are there
        if behind:
            _cli(replica.port, "REPLICAOF", "NO", "ONE")  # behind from now on
            assert time.time() < when, "replication stopped after the slot: start earlier"
            cluster.note("fault", "replica", fault="replication stopped", slot=when)
        run1 = cluster.wait_for(first("begin", job="once", attempt=1), 15, "the first run")
        time.sleep(2 * HEARTBEAT)  # the claim and a renewal or two are on the primary
        if not behind:
            _caught_up(primary.port, replica.port)
            _cli(replica.port, "REPLICAOF", "NO", "ONE")
        primary.down()  # kill -9
        proxy.switch(replica.port)  # the replica is the primary now
        failed_over = cluster.note("fault", "primary", fault="failover")
        if behind:
            _decided_again(cluster, run1, failed_over)
        else:
            end = cluster.wait_for(first("end", pid=run1["pid"]), 15, "the run's end")
            assert not end["aborted"], end
            cluster.wait_for(first("event", type="success", job="once"), 15, "its success")
        time.sleep(LEASE + 2 * HEARTBEAT)  # nothing else may start the slot meanwhile
        records = cluster.records()
        assert len(begins(records, "once")) == (2 if behind else 1), begins(records, "once")
        assert len(events(records, "success", "once")) == 1
        assert bool(events(records, "lost", "once")) == behind
        stored = history(url_with_prefix(f"redis://{HOST}:{replica.port}/0", namespace),
                         "once")
        assert [(r.slot, r.status) for r in stored if not r.manual] == [
            (run1["slot"], "success")]
    finally:
        proxy.close()
        primary.close()
        replica.close()


def _caught_up(primary: int, replica: int) -> None:
    deadline = time.monotonic() + 10
    while _offset(replica, "slave_repl_offset") < _offset(primary, "master_repl_offset"):
        assert time.monotonic() < deadline, "the replica never caught up"
        time.sleep(0.02)


def _decided_again(cluster: Cluster, run1: dict[str, Any], failed_over: float) -> None:
    """The runner is told its run is gone, stops it, and the slot starts once more."""
    fired, again = decided_again(cluster, run1, failed_over)
    print(json.dumps(dict(measured="failover", told_after=fired["t"] - failed_over,
                          started_again_after=again["t"] - failed_over)))
    assert told_gone(cluster.records()) == [run1["instance"]]
