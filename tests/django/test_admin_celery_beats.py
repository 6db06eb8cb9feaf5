"""Two real ``celery beat`` processes (SQLite and PostgreSQL stores) publish a Celery
entry saved through the Django admin: each of its slots once, with the task chosen in the
form; after an edit in the admin (every 2 s) no slot of the old grid; none after a delete
there."""

from __future__ import annotations

import time
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from django.conf import settings
from django.test import Client, override_settings

from anarchon_celery import HANDLER, Entry
from anarchon_django.control import runtime
from tests.django.control_support import staff  # noqa: F401
from tests.django.test_admin_celery import ADD, ALL, APP, CHANGE, DELETE, form
from tests.harness.celery.cluster import CeleryCluster, broker_available
from tests.system.celery.test_beats import SCHEDULER, require, store

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

Staff = Callable[..., Client]


def _slots(cluster: CeleryCluster, job: str, after: float = 0.0) -> list[int]:
    return sorted({r["slot"] for r in cluster.records("publish", job=job)
                   if r["slot"] / 1000 > after})


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_beats_publish_an_entry_saved_in_the_admin(staff: Staff, tmp_path: Path,  # noqa: F811
                                                   backend: str) -> None:
    require("the Redis broker", broker_available())
    spec = store(backend)
    require(backend, spec.unavailable())
    url = spec.url_for("ca_" + uuid.uuid4().hex[:10])
    queue = "ca_" + uuid.uuid4().hex[:8]
    cluster = CeleryCluster(tmp_path, {"queue": queue, "backend": url,
                                       "scheduler": SCHEDULER,
                                       "entries": {"pulse": {"task": "t.noop", "every": 1}}})
    config = {**settings.ANARCHON, "BACKEND": url, "SCHEDULER": SCHEDULER,
              "CELERY_APP": "tests.django.test_admin_celery:APP"}
    marks: dict[str, float] = {}
    with override_settings(ANARCHON=config):
        core = runtime.build_scheduler(instance_id="checker")
        client = staff(*ALL, name="beat-ops")
        try:
            for name in ("a", "b"):
                cluster.beat(name)
            cluster.wait_for(lambda: sum(HANDLER in names for names in
                                         core.offered_handlers().values()) >= 2,
                             90, "two beats offering celery:publish")
            response = client.post(ADD, form(name="admin-dyn", every="1s", queue=queue,
                                             routing_key=None, exchange=None,
                                             expires=None, max_attempts=None))
            assert response.status_code == 302, response.context["form"].errors
            marks["saved"] = time.time()
            cluster.wait_for(lambda: len(_slots(cluster, "admin-dyn")) >= 4, 30,
                             "four 1 s slots")
            response = client.post(CHANGE + "?job=admin-dyn",
                                   form(name="admin-dyn", every="2s", queue=queue,
                                        task="proj.cleanup", args="", kwargs="",
                                        routing_key=None, exchange=None, expires=None,
                                        max_attempts=None))
            assert response.status_code == 302, response.context["form"].errors
            marks["changed"] = time.time()
            cluster.wait_for(lambda: len(_slots(cluster, "admin-dyn", marks["changed"])) >= 2,
                             30, "two 2 s slots")
            assert Entry.load(APP, "admin-dyn").task == "proj.cleanup"
            assert client.post(DELETE + "?job=admin-dyn").status_code == 302
            marks["deleted"] = time.time()
            cluster.wait_for(lambda: len(_slots(cluster, "pulse", marks["deleted"])) >= 4, 30,
                             "four pulses after the delete")
        finally:
            cluster.stop_all()
            core.close()
    publishes = [r for r in cluster.records("publish") if r["job"] == "admin-dyn"]
    per_slot = Counter(r["slot"] for r in publishes)
    assert set(per_slot.values()) == {1}, [s for s, n in per_slot.items() if n > 1]
    first = [r for r in publishes if r["slot"] / 1000 <= marks["changed"]]
    later = [r for r in publishes if r["slot"] / 1000 > marks["changed"]]
    assert {r["task"] for r in first} == {"proj.report"}
    assert {r["task"] for r in later} == {"proj.cleanup"}
    assert all(r["slot"] % 2000 == 0 for r in later), "old 1 s grid after the edit"
    assert not [r for r in publishes if r["slot"] / 1000 > marks["deleted"]]
    print(f"{backend}: admin entry: {len(first)} slots every 1 s, {len(later)} every 2 s, "
          f"publishes per slot {sorted(set(per_slot.values()))}, beats "
          f"{len({r['pid'] for r in publishes})}")
