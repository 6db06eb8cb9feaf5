"""Latency on the runner's link: 0.15, 0.5, 2 and 4 s of round trip added to every byte.

Our own Redis; each instance reaches it through a :class:`~tests.harness.proxies.DelayProxy`
of its own, and once the run has started the runner's proxy gets the latency (lease 3 s,
heartbeat 0.5 s). Expected (docs/guarantees.md, "the local lease deadline"): never two
copies at once — if a backup starts attempt 2, the runner's signal fired before; one
success. A round trip well under the heartbeat call's 0.4 s (0.15 s) changes nothing: no
backup starts. At 0.5 s the calls are given up and the run may go to a backup (a call
timed out costs a reconnection, several round trips); at 2 s and 4 s no renewal can be
confirmed within the lease: the runner stops at its deadline and a backup finishes the
run.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from anarchon.engine.lease_keeper import CALL_FRACTION
from tests.harness.checks import begins, events, history
from tests.harness.cluster import Cluster, WorkerCluster, first
from tests.harness.proxies import DelayProxy
from tests.harness.servers import HOST, RedisLike
from tests.stores.redis import url_with_prefix
from tests.system.faults.conftest import missing

# serial: tight timings but little CPU, so scripts/test.sh runs it apart from the
# CPU-heavy system tests; its verdicts hang on 0.15 s round trips against a 0.4 s budget
pytestmark = pytest.mark.serial


LEASE, HEARTBEAT = 3.0, 0.5
INSTANCES = ("a", "b", "c")


class ViaProxies(WorkerCluster):
    """Workers that each reach the store at their own URL."""

    urls: dict[str, str]

    def spawn(self, instance: str, wrapper: Any = (), **extra: Any) -> Any:
        shared, self.url = self.url, self.urls[instance]
        try:
            return super().spawn(instance, wrapper, **extra)
        finally:
            self.url = shared


@pytest.mark.parametrize("rtt", [0.15, 0.5, 2.0, 4.0])
def test_latency_on_the_runners_link_never_makes_two_copies(
        tmp_path: Path, namespace: str, clusters: list[Cluster], rtt: float) -> None:
    binary = shutil.which("redis-server")
    if binary is None:
        missing("redis-server")
    assert binary is not None
    server = RedisLike(binary, tmp_path, aof=False)
    proxies = {i: DelayProxy(server.port) for i in INSTANCES}
    try:
        cluster = ViaProxies(server.url, tmp_path / "log.jsonl", [
            dict(kind="at", name="long", when="@go", duration=4 * LEASE)],
            dict(lease=LEASE, heartbeat=HEARTBEAT, jitter=0.1), stop_timeout=5)
        cluster.urls = {i: url_with_prefix(f"redis://{HOST}:{p.port}/0", namespace)
                        for i, p in proxies.items()}
        clusters.append(cluster)
        cluster.start_deferred(*INSTANCES)
        run1 = cluster.wait_for(first("begin", job="long", attempt=1), 15, "attempt 1")
        runner = run1["instance"]
        time.sleep(1.5 * HEARTBEAT)
        slowed_m = time.monotonic()
        proxies[runner].set_rtt(rtt)
        cluster.note("fault", runner, fault=f"latency {rtt}s", m=slowed_m)
        cluster.wait_for(first("event", type="success", job="long"), 4 * LEASE + 20,
                         "the run's success")
        time.sleep(LEASE)  # a late takeover would show up meanwhile
        records = cluster.records()
        starts = begins(records, "long")
        fired = [r for r in records if r["kind"] == "abort" and r["pid"] == run1["pid"]]
        second = [r for r in starts if r["attempt"] == 2]
        print(json.dumps(dict(measured="latency", rtt=rtt, attempts=len(starts),
                              signal_after=fired[0]["m"] - slowed_m if fired else None,
                              backup_after=second[0]["m"] - slowed_m if second else None)))
        if second:
            assert fired and fired[0]["signal"] == "lost", fired
            assert fired[0]["m"] <= second[0]["m"], (
                f"two copies for {fired[0]['m'] - second[0]['m']:.3f}s")
        if rtt < HEARTBEAT * CALL_FRACTION / 2:  # each renewal answered in time
            assert [r["attempt"] for r in starts] == [1] and not fired, (starts, fired)
        elif rtt >= LEASE / 2:  # no renewal can be confirmed within the lease
            assert second and second[0]["instance"] != runner, starts
        assert len(events(records, "success", "long")) == 1
        statuses = [r.status for r in history(cluster.urls[INSTANCES[0]], "long")
                    if not r.manual]
        assert statuses.count("success") == 1, statuses
    finally:
        for proxy in proxies.values():
            proxy.set_rtt(0.0)
            proxy.close()
        server.close()
