"""Runtime control on three real worker processes: pause, resume, reschedule, and a
dynamic job added and removed while they run.

A controller in the test process (a ``Scheduler`` on the same store, never started)
makes each change. Every check compares the store's history (each attempt's
``started_at``, the store's time inside the claim) with the moment the call returned:
a claim that won was stored before the change (else the version fence refused it), so
"no start after the call returned" allows nothing. Short timings (lease 2 s, heartbeat
0.3 s, a job every 1 s) keep each test to seconds.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from anarchon import Scheduler, from_url
from anarchon.backends.capabilities import ControlStore
from anarchon.history import RunRecord
from tests.harness.cluster import JobCluster
from tests.stores import StoreSpec
from tests.system.cluster.conftest import CLUSTER_STORES

LEASE, HEARTBEAT = 2.0, 0.3
OPTIONS = dict(lease=LEASE, heartbeat=HEARTBEAT, jitter=0.1)
INSTANCES = ("a", "b", "c")
TICK = dict(kind="every", name="tick", when="1s", duration=0.1)

#: every store of the cluster suite must support runtime control: none is left out
CONTROL_STORES = ("postgres", "redis", "sqlite", "valkey")
#: stores whose runtime control is still on its branch: expected to fail until merged
#: (remove an entry when its branch lands). The Django store is not in the cluster suite
#: (it needs Django configured in each process): its processes run in
#: tests/django/test_cluster.py, with rc-django-store.
LANDS_WITH: dict[str, str] = {}


def _param(spec: StoreSpec) -> Any:
    branch = LANDS_WITH.get(spec.id)
    marks = [] if branch is None else [pytest.mark.xfail(
        strict=False, reason=f"runtime control on {spec.id} lands with branch {branch}")]
    return pytest.param(spec, marks=marks, id=spec.id)


ON_CONTROL_STORES = pytest.mark.parametrize(
    "lease_store", [_param(s) for s in CLUSTER_STORES if s.id in CONTROL_STORES],
    indirect=True)


def test_every_cluster_store_is_expected_to_support_control() -> None:
    assert sorted(s.id for s in CLUSTER_STORES) == sorted(CONTROL_STORES), (
        "a lease store of the cluster suite is not in CONTROL_STORES: runtime control "
        "must be proven on it too")


@pytest.fixture
def controller(store_url: str, lease_store: StoreSpec) -> Iterator[Scheduler]:
    """A scheduler on the test's store that only makes changes (never started)."""
    backend = from_url(store_url)
    assert isinstance(backend, ControlStore), f"the {lease_store.id} store has no runtime control"
    scheduler = Scheduler(backend, instance_id="controller")
    yield scheduler
    scheduler.close()


@pytest.fixture
def make_cluster(store_url: str, tmp_path: Path) -> Iterator[Callable[..., JobCluster]]:
    made: list[JobCluster] = []

    def make(job: dict[str, Any], handlers: tuple[str, ...] = ()) -> JobCluster:
        cluster = JobCluster(store_url, tmp_path / f"log{len(made)}.jsonl", job, OPTIONS,
                          handlers)
        made.append(cluster)
        return cluster

    yield make
    for cluster in made:
        cluster.stop_all()


Lines = list[dict[str, Any]]


def begins(lines: Lines, job: str = "tick") -> Lines:
    return [r for r in lines if r["kind"] == "begin" and r["job"] == job]


def applied(lines: Lines, action: str, since: float) -> set[str]:
    """The instances that logged applying a change of ``action`` (after ``since``)."""
    return {r["instance"] for r in lines if r["kind"] == "event" and r["type"] == "change"
            and r["t"] >= since and str(r["reason"]).startswith(f"{action} by controller")}


def slots_begun(job: str, count: int, after: float = 0.0) -> Callable[[Lines], bool]:
    """A check: ``count`` slots of ``job`` after wall time ``after`` have begun."""
    return lambda lines: len({r["slot"] for r in begins(lines, job)
                              if r["slot"] >= after * 1000}) >= count


def started_since(controller: Scheduler, job: str, since: float) -> list[RunRecord]:
    """Attempts of ``job`` the store started at or after wall time ``since``."""
    return [r for r in controller.history(job, 1000) if r.started_at.timestamp() >= since]


@ON_CONTROL_STORES
def test_pause_stops_every_start_and_resume_starts_again(
        make_cluster: Callable[..., JobCluster], controller: Scheduler) -> None:
    cluster = make_cluster(TICK)
    cluster.start(*INSTANCES)
    cluster.wait_for(slots_begun("tick", 2), 20, "two slots before the pause")
    asked = time.time()  # with a wake-up channel, instances apply it before it returns
    controller.pause("tick")
    paused = time.time()

    def skipped_everywhere(lines: Lines) -> bool:
        skips = {r["slot"] for r in lines if r["kind"] == "event" and r["type"] == "skip"
                 and r["reason"] == "paused" and r["slot"] >= paused * 1000}
        return applied(lines, "pause", asked) == set(INSTANCES) and len(skips) >= 3

    cluster.wait_for(skipped_everywhere, 30, "every instance to skip three slots as paused")
    assert started_since(controller, "tick", paused) == []
    assert [job.paused for job in controller.jobs() if job.name == "tick"] == [True]

    controller.resume("tick")
    resumed = time.time()
    cluster.wait_for(slots_begun("tick", 2, after=resumed), 15, "runs after the resume")
    again = started_since(controller, "tick", resumed)
    assert again, "the store holds no start after the resume"
    assert {r.reason for r in again} == {"scheduled"}


@ON_CONTROL_STORES
def test_reschedule_starts_no_slot_off_the_new_grid(
        make_cluster: Callable[..., JobCluster], controller: Scheduler) -> None:
    cluster = make_cluster(TICK)
    cluster.start(*INSTANCES)
    cluster.wait_for(slots_begun("tick", 2), 20, "two slots on the 1 s grid")
    asked = time.time()
    controller.reschedule("tick", every="2s")
    returned = time.time()
    cluster.wait_for(lambda lines: applied(lines, "reschedule", asked) == set(INSTANCES)
                     and slots_begun("tick", 3, after=returned)(lines), 20,
                     "every instance on the 2 s grid, three slots started")
    after = started_since(controller, "tick", returned)
    assert [r.slot for r in after if r.slot % 2000 != 0] == [], "a slot off the new grid"
    assert len({r.slot for r in after}) >= 3
    assert set(Counter(r.slot for r in after).values()) == {1}
    assert [job.schedule for job in controller.jobs() if job.name == "tick"] == ["every 2s"]


@ON_CONTROL_STORES
def test_dynamic_job_runs_each_slot_once_until_removed(
        make_cluster: Callable[..., JobCluster], controller: Scheduler) -> None:
    cluster = make_cluster(TICK, handlers=("work",))
    cluster.start(*INSTANCES)
    cluster.wait_for(slots_begun("tick", 1), 20, "the instances running")
    controller.add_job("dyn", handler="work", every="1s", params={"n": 1})
    added = time.time()
    cluster.wait_for(slots_begun("dyn", 5, after=added), 20, "five slots of the dynamic job")
    asked = time.time()
    controller.remove_job("dyn")
    removed = time.time()
    cluster.wait_for(lambda lines: applied(lines, "remove", asked) == set(INSTANCES)
                     and slots_begun("tick", 3, after=removed)(lines), 20,
                     "every instance to drop the job, three ticks later")
    assert started_since(controller, "dyn", removed) == []
    runs = controller.history("dyn", 1000)
    assert set(Counter(r.slot for r in runs).values()) == {1}, "a slot started twice"
    logged = begins(cluster.records(), "dyn")
    assert set(Counter(r["slot"] for r in logged).values()) == {1}
    assert {r["params"]["n"] for r in logged} == {1}
    # no slot lost between the first and the last (a slow run may skip one as overlap)
    overlap = {r["slot"] for r in cluster.records() if r["kind"] == "event"
               and r["type"] == "skip" and r["job"] == "dyn" and r["reason"] == "overlap"}
    slots = sorted({r.slot for r in runs} | overlap)
    assert slots == list(range(slots[0], slots[-1] + 1, 1000)), "a slot was lost"
    assert "dyn" not in {job.name for job in controller.jobs()}
