"""The store goes away for longer than a lease while a long run and a 1 s job are active.

Redis and Valkey: our own server (append-only file, fsync always) stopped and restarted
on the same port. PostgreSQL: our own cluster (initdb, ~2 s) stopped with ``pg_ctl -m
immediate`` and restarted. SQLite: another connection holds the write lock.

Expected (STORES.md faults 6 and 7): the runner cannot renew, aborts itself at its last
successful renewal + lease and emits ``lost``; nobody starts anything during the outage;
afterwards a backup takes the long run over (attempt 2, never concurrently with attempt
1), no scheduled run starts later than ``max_late``, no slot runs twice at once, and the
1 s job runs again.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import _require
from tests.harness.checks import begins, concurrent_same_slot, events, history
from tests.harness.cluster import first
from tests.harness.servers import Outage, RedisLike, SqliteLock, ThrowawayPostgres, valkey_binary
from tests.stores import StoreSpec
from tests.stores.redis import url_with_prefix
from tests.system.faults.conftest import HEARTBEAT, LEASE, MakeCluster, long_stores, missing

OUTAGE = LEASE + 1.0   # longer than a heartbeat and than the lease
MAX_LATE = 1.0



@pytest.fixture(params=long_stores("redis-cluster"), ids=lambda s: s.id)
def lease_store(request: pytest.FixtureRequest) -> StoreSpec:
    """The long fault test's stores (see :func:`tests.system.faults.conftest.long_stores`)."""
    spec: StoreSpec = request.param
    _require(spec)
    return spec


@pytest.fixture
def outage(lease_store: StoreSpec, store_url: str, namespace: str,
           tmp_path: Path) -> Iterator[Outage]:
    server: Outage
    if lease_store.id == "sqlite":
        server = SqliteLock(store_url + "&busy_timeout=0.5s")
    elif lease_store.id in ("redis", "valkey"):
        binary = "redis-server" if lease_store.id == "redis" else valkey_binary()
        import shutil

        if binary is None or shutil.which(binary) is None:
            missing(f"a {lease_store.id} server binary")
        assert binary is not None
        own = RedisLike(binary, tmp_path)
        own.url = url_with_prefix(own.url, namespace,
                                  scheme="valkey" if lease_store.id == "valkey" else None)
        server = own
    elif lease_store.id == "postgres":
        try:
            pg = ThrowawayPostgres()
        except FileNotFoundError:
            missing("initdb and pg_ctl")
        pg.url += f"?table=t_{namespace}"
        server = pg
    else:  # the Redis Cluster is excluded above: a node going away is a failover
        raise AssertionError(f"no outage rig for {lease_store.id}")
    yield server
    server.close()


def test_store_outage_longer_than_the_lease(outage: Outage, make_cluster: MakeCluster) -> None:
    cluster = make_cluster(outage.url, [
        dict(kind="every", name="tick", when="1s", duration=0.2,
             options=dict(max_late=MAX_LATE, jitter=0.1)),
        dict(kind="at", name="long", when="@go", duration=12.0),
    ])
    cluster.start_deferred("a", "b", "c")
    run1 = cluster.wait_for(first("begin", job="long", attempt=1), 10, "the long run")
    cluster.wait_for(lambda lines: len(begins(lines, "tick")) >= 2, 10, "two ticks")
    time.sleep(0.5)  # let the runner renew at least once before the outage
    went_down = time.time()
    outage.down()
    time.sleep(OUTAGE)  # the fault itself: the store stays away this long
    restarting = time.time()  # from here the store may answer before up() returns
    outage.up()
    came_back = time.time()

    # the runner aborted itself (on its monotonic clock) and said so
    end1 = cluster.wait_for(first("end", pid=run1["pid"], job="long", attempt=1), 5,
                            "the first runner's end")
    assert end1["signal"] == "lost", end1
    assert end1["t"] <= went_down + LEASE + 2 * HEARTBEAT + 1.0, (end1["t"] - went_down)
    cluster.wait_for(first("event", type="lost", job="long", pid=run1["pid"]), 5,
                     "lost from the runner")
    # a backup takes it over once the store is back, never alongside attempt 1
    run2 = cluster.wait_for(first("begin", job="long", attempt=2), LEASE + 6, "attempt 2")
    assert run2["reason"] == "takeover"
    assert run2["t"] >= end1["t"]
    # the 1 s job resumes after the outage
    cluster.wait_for(lambda lines: len([r for r in begins(lines, "tick")
                                        if r["t"] > came_back]) >= 2, 10, "ticks after")

    records = cluster.records()
    for run in begins(records, "tick", reason="scheduled") + begins(records, "long",
                                                                     reason="scheduled"):
        late = run["t"] - run["slot"] / 1000
        limit = MAX_LATE if run["job"] == "tick" else 60.0
        assert late <= limit + 0.5, f"{run} started {late:.2f}s after its slot"
    during = [r for r in begins(records, "tick") + begins(records, "long")
              if went_down + 0.5 < r["t"] < restarting]
    assert not during, f"runs started while the store was down: {during}"
    assert not concurrent_same_slot(records, "tick")
    assert not concurrent_same_slot(records, "long")
    assert all(e["attempt"] >= 2 for e in events(records, "success", "long"))
    statuses = {(r.attempt, r.status) for r in history(outage.url, "long")}
    assert (1, "interrupted") in statuses, statuses
    assert any(attempt == 2 for attempt, _ in statuses), statuses
