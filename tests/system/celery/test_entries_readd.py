"""``anarchon_celery.Entry``: save, delete and save again under the same name while real
``celery beat`` processes run it (so they registered it in the store): the second save is
accepted at once (never "declared in code"), every slot is published once, none between
the delete and the new save; then every beat restarts and the re-added entry still runs
once per slot."""

from __future__ import annotations

import time
import uuid
from collections import Counter
from pathlib import Path

import pytest
from celery import Celery

from anarchon_celery import HANDLER, Entry
from anarchon_celery.entries.entry import core_for
from tests.harness.celery.cluster import CeleryCluster, broker_available
from tests.system.celery.test_beats import SCHEDULER, require, store
from tests.system.celery.test_entries_journeys import PULSE, journey_app, slots

BACKENDS = ["sqlite", "redis", "postgres"]


def _start(backend: str, tmp_path: Path) -> tuple[CeleryCluster, str, str]:
    require("the Redis broker", broker_available())
    spec = store(backend)
    require(backend, spec.unavailable())
    ns = "cr_" + uuid.uuid4().hex[:10]
    return (CeleryCluster(tmp_path, {"queue": ns, "backend": spec.url_for(ns),
                                     "scheduler": SCHEDULER, "entries": PULSE}),
            spec.url_for(ns), ns)


def _offered(cluster: CeleryCluster, app: Celery, count: int) -> None:
    with core_for(app) as core:
        cluster.wait_for(lambda: sum(HANDLER in names for names in
                                     core.offered_handlers().values()) >= count,
                         90, f"{count} beats offering celery:publish")


def _once_per_slot(cluster: CeleryCluster) -> None:
    per_slot = Counter((r["job"], r["slot"]) for r in cluster.records("publish"))
    assert set(per_slot.values()) == {1}, [k for k, n in per_slot.items() if n > 1]


@pytest.mark.parametrize("backend", BACKENDS)
def test_save_delete_save_with_beats_running(tmp_path: Path, backend: str) -> None:
    cluster, url, ns = _start(backend, tmp_path)
    app = journey_app(url, ns)
    try:
        for name in ("a", "b", "c"):
            cluster.beat(name)
        _offered(cluster, app, 3)
        Entry(app, "readd", "t.ok", 1).save()
        cluster.wait_for(lambda: len(slots(cluster, "readd")) >= 2, 30, "two slots")
        Entry.load(app, "readd").delete()
        deleted = time.time()
        Entry(app, "readd", "t.ok", 2).save()  # at once: the name is free
        saved = time.time()
        assert Entry.load(app, "readd").schedule is not None
        cluster.wait_for(lambda: len(slots(cluster, "readd", saved)) >= 3, 30,
                         "three slots of the entry saved again")
    finally:
        cluster.stop_all()
    _once_per_slot(cluster)
    readded = slots(cluster, "readd", deleted)
    assert all(s % 2000 == 0 for s in readded), f"the deleted 1 s entry ran: {readded}"


@pytest.mark.parametrize("backend", ["redis"])
def test_the_re_added_entry_runs_once_per_slot_after_every_beat_restarted(
        tmp_path: Path, backend: str) -> None:
    cluster, url, ns = _start(backend, tmp_path)
    app = journey_app(url, ns)
    try:
        for name in ("a", "b"):
            cluster.beat(name)
        _offered(cluster, app, 2)
        Entry(app, "readd", "t.ok", 1).save()
        cluster.wait_for(lambda: len(slots(cluster, "readd")) >= 1, 30, "a slot")
        Entry.load(app, "readd").delete()
        Entry(app, "readd", "t.ok", 1).save()
        cluster.stop_all()
        restarted = time.time()
        for name in ("c", "d", "e"):
            cluster.beat(name)
        cluster.wait_for(lambda: len(slots(cluster, "readd", restarted + 1)) >= 3, 60,
                         "three slots after every beat restarted")
    finally:
        cluster.stop_all()
    _once_per_slot(cluster)
