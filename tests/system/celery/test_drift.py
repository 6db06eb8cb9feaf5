"""A rolling deploy changes an entry: the live beats disagree on its definition, and
each says so (a WARNING naming the entry and both definitions; ``anarchon jobs`` shows
DRIFT). Three real beats, two on ``every 2 s``, one on ``every 3 s``."""

from __future__ import annotations

import re
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.harness.celery.cluster import CeleryCluster, broker_available
from tests.harness.procs import ROOT
from tests.system.celery.test_beats import require, store

#: heartbeat 0.3 s: the beats compare definitions every 3 s
SCHEDULER = {"lease": 2.0, "heartbeat": 0.3, "jitter": 0.2}
OLD = {"tick": {"task": "t.ok", "every": 2}, "same": {"task": "t.noop", "every": 5}}
NEW = {"tick": {"task": "t.ok", "every": 3}, "same": {"task": "t.noop", "every": 5}}


def jobs(url: str) -> str:
    return subprocess.run([sys.executable, "-m", "anarchon", "jobs", "--backend", url],
                          cwd=ROOT, capture_output=True, text=True, timeout=60,
                          check=True).stdout


@pytest.mark.parametrize("backend", ["redis", "postgres"])
def test_live_beats_with_two_definitions_warn(tmp_path: Path, backend: str) -> None:
    require("the Redis broker", broker_available())
    spec = store(backend)
    require(backend, spec.unavailable())
    ns = "cd_" + uuid.uuid4().hex[:10]
    url = spec.url_for(ns)
    cluster = CeleryCluster(tmp_path, {"queue": ns, "backend": url, "scheduler": SCHEDULER})
    names = ("a", "b", "c")
    try:
        cluster.beat("a", entries=OLD)
        cluster.beat("b", entries=OLD)
        cluster.beat("c", entries=NEW)

        def warned() -> bool:
            return all("live beats disagree" in cluster.output(n) for n in names)

        cluster.wait_for(warned, 60, "a drift warning from every beat")
        listing = cluster.wait_for(lambda: "DRIFT" in (out := jobs(url)) and out, 30,
                                   "anarchon jobs showing the drift")

        def both_grids() -> bool:
            slots = [r["slot"] for r in cluster.records("publish", job="tick")]
            return (any(s % 2000 == 0 and s % 3000 for s in slots)  # the old beats' grid
                    and any(s % 3000 == 0 and s % 2000 for s in slots))  # the new beat's

        cluster.wait_for(both_grids, 30, "slots of both definitions published")
    finally:
        cluster.stop_all()
    for name in names:
        lines = [x for x in cluster.output(name).splitlines() if "live beats disagree" in x]
        assert all("WARNING" in x and "'tick'" in x for x in lines), lines
        assert any("<freq: 2.00 seconds>" in x and "<freq: 3.00 seconds>" in x
                   for x in lines), lines
        assert not any("'same'" in x for x in lines), "an unchanged entry is no drift"
    assert re.search(r"^tick\s+.*DRIFT: live beats hold 2 definitions", listing, re.M), listing
    assert not re.search(r"^same\s+.*DRIFT", listing, re.M), listing
    # both definitions ran while the beats disagreed (waited for above), each slot once
    slots = [r["slot"] for r in cluster.records("publish", job="tick")]
    assert len(slots) == len(set(slots))
