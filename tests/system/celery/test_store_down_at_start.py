"""``celery beat -S anarchon_celery:Scheduler`` started while its store is down: beat
keeps waiting (one WARNING naming the store, no password), then publishes once the store
is up. Measured: store up -> first publish. The store is our own Redis on a free port."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

from tests.harness.celery.cluster import CeleryCluster, broker_available
from tests.harness.servers import throwaway
from tests.system.celery.test_beats import record, require
from tests.system.faults.conftest import missing

PASSWORD = "beat-s3cret"
DOWN = 4.0
FIRST_RUN = 15.0


def test_beat_waits_for_a_store_that_is_down_at_start(tmp_path: Path) -> None:
    require("the Redis broker", broker_available())
    try:
        store = throwaway("redis", tmp_path, "bd_" + uuid.uuid4().hex[:8],
                          password=PASSWORD, start=False)
    except FileNotFoundError as exc:
        missing(str(exc))
    cluster = CeleryCluster(tmp_path, {"queue": "bd_" + uuid.uuid4().hex[:10],
                                       "backend": store.url,
                                       "scheduler": {"lease": 2, "heartbeat": 0.3},
                                       "entries": {"tick": {"task": "t.ok", "every": 1}}})
    try:
        beat = cluster.beat("b1")
        cluster.wait_for(lambda: "does not answer" in cluster.output("b1"), 20,
                         "the store warning")
        time.sleep(DOWN)  # the store stays down a while: beat must keep waiting
        assert beat.poll() is None, cluster.output("b1")[-2000:]
        store.up()
        up = time.time()
        first = cluster.wait_for(lambda: [r for r in cluster.records("publish")
                                          if r["t"] > up], FIRST_RUN,
                                 "a publish after the store came up")
        after_up = round(first[0]["t"] - up, 2)
        output = cluster.output("b1")
        print(f"\nBEAT-DOWN-AT-START first publish {after_up}s after the store came up")
        record("beat_down_at_start_first_publish_s", after_up)
        # one warning (celery may print a record twice: its handler and the root's)
        warned = [line for line in output.splitlines() if "does not answer" in line]
        assert warned and all("1 attempt(s)" in line for line in warned), warned
        assert PASSWORD not in output
        assert f"127.0.0.1:{store.url.split(':')[-1].split('/')[0]}" in output
    finally:
        cluster.stop_all()
        store.close()
