"""Real ``celery beat`` processes pick up ``anarchon_celery.Entry`` changes.

Three beats on one lease store, a 1 s code entry ``pulse`` as the clock. While they run,
this process saves an entry (every 1 s), changes it to every 2 s, disables it, enables
it again and deletes it. Every slot is published once; after ``save()`` has returned no
slot of the old schedule due after that instant is published; none while disabled or
deleted.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from pathlib import Path

import pytest

from anarchon_celery import HANDLER, Entry
from anarchon_celery.entries.entry import core_for
from tests.harness.celery.cluster import (
    CeleryCluster,
    broker_available,
)
from tests.system.celery.test_beats import SCHEDULER, record, require, store
from tests.system.celery.test_entries_journeys import BACKENDS, PULSE, journey_app, slots


@pytest.mark.parametrize("backend", BACKENDS)
def test_entry_changes_reach_three_beats(tmp_path: Path, backend: str) -> None:
    require("the Redis broker", broker_available())
    spec = store(backend)
    require(backend, spec.unavailable())
    ns = "ce_" + uuid.uuid4().hex[:10]
    url = spec.url_for(ns)
    cluster = CeleryCluster(tmp_path, {"queue": ns, "backend": url, "scheduler": SCHEDULER,
                                       "entries": PULSE})
    app = journey_app(url, ns)
    marks: dict[str, float] = {}

    def pulses_after(mark: str, count: int) -> bool:
        return len(slots(cluster, "pulse", marks[mark])) >= count

    try:
        for name in ("a", "b", "c"):
            cluster.beat(name)
        with core_for(app) as core:
            cluster.wait_for(lambda: sum(HANDLER in names for names in
                                         core.offered_handlers().values()) >= 3,
                             90, "three beats offering celery:publish")
        Entry(app, "dyn", "t.ok", 1).save()
        marks["saved"] = time.time()
        cluster.wait_for(lambda: len(slots(cluster, "dyn")) >= 5, 30, "five 1 s slots")

        Entry(app, "dyn", "t.ok", 2).save()
        marks["changed"] = time.time()
        cluster.wait_for(lambda: len(slots(cluster, "dyn", marks["changed"])) >= 3, 30,
                         "three 2 s slots")

        Entry(app, "dyn", "t.ok", 2, enabled=False).save()
        marks["disabled"] = time.time()
        cluster.wait_for(lambda: pulses_after("disabled", 4), 30, "four pulses disabled")

        marks["enabling"] = time.time()  # slots after this may run: save() enables them
        Entry(app, "dyn", "t.ok", 2).save()
        marks["enabled"] = time.time()
        cluster.wait_for(lambda: len(slots(cluster, "dyn", marks["enabled"])) >= 2, 30,
                         "two slots after enabling")

        Entry.load(app, "dyn").delete()
        marks["deleted"] = time.time()
        cluster.wait_for(lambda: pulses_after("deleted", 4), 30, "four pulses deleted")
    finally:
        cluster.stop_all()

    publishes = cluster.records("publish")
    per_slot = Counter((r["job"], r["slot"]) for r in publishes)
    assert set(per_slot.values()) == {1}, [k for k, n in per_slot.items() if n > 1]
    dyn = slots(cluster, "dyn")
    first = [s for s in dyn if s / 1000 <= marks["changed"]]
    assert first == list(range(first[0], first[-1] + 1000, 1000)), "a 1 s slot was lost"
    after_change = [s for s in dyn if s / 1000 > marks["changed"]]
    assert all(s % 2000 == 0 for s in after_change), \
        f"old 1 s grid published after save() returned: {after_change}"
    assert not [s for s in dyn if marks["disabled"] < s / 1000 <= marks["enabling"]], \
        "published while disabled"
    assert not [s for s in dyn if s / 1000 > marks["deleted"]], "published after delete"
    assert len({r["pid"] for r in publishes if r["job"] == "dyn"}) >= 2, \
        "any beat runs the entry"
    phases = {"every_1s": first, "every_2s": [s for s in after_change
                                             if s / 1000 <= marks["disabled"]],
              "disabled": [s for s in dyn if marks["disabled"] < s / 1000 <= marks["enabling"]],
              "re_enabled": [s for s in dyn if marks["enabling"] < s / 1000 <= marks["deleted"]],
              "deleted": [s for s in dyn if s / 1000 > marks["deleted"]]}
    dyn_publishes = [r for r in publishes if r["job"] == "dyn"]
    record(f"entry_publishes_per_slot.{backend}", {
        "slots": len(dyn), "publishes": len(dyn_publishes),
        "per_slot": len(dyn_publishes) / max(len(dyn), 1),
        "max_per_slot": max(per_slot.values()),
        "slots_per_phase": {k: len(v) for k, v in phases.items()},
        "beats_publishing": len({r["pid"] for r in dyn_publishes})})
