"""A runner cut off from the store while the store and the other instances stay up.

Each instance runs in a network namespace of its own, linked to a hub namespace that
holds our own store server (:mod:`tests.harness.netlab`); the fault takes the runner's link
down (every packet either way silently dropped). Expected (docs/guarantees.md, "the
runner is cut off from the store"): the runner's ``ctx.signal`` fires with reason ``lost``
at its local lease deadline — before any backup can start attempt 2 (overlap <= 0, both
instants logged with the monotonic and the wall clock); a backup takes the run over and
finishes it once; after the link heals the runner rejoins, nothing that finished is run
again. A partition shorter than the lease changes nothing. At the default lease (30 s /
5 s) the test runs on Redis, and on every store with ``ANARCHON_FAULTS_FULL=1``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.harness.checks import begins, events
from tests.harness.cluster import Cluster, Records, WorkerCluster, first
from tests.harness.netlab import HubPostgres, HubRedis, NetLab, lab_missing
from tests.system.faults.conftest import full_run, missing

# serial: tight timings but little CPU, so scripts/test.sh runs it apart from the
# CPU-heavy system tests; it makes network namespaces and cuts their links
pytestmark = pytest.mark.serial

INSTANCES = ("a", "b", "c")
STORES = ("redis", "valkey", "postgres", "django-postgres")


class NetProcs(WorkerCluster):
    """Fault-suite workers, each in its namespace of ``lab``."""

    def __init__(self, lab: NetLab, django: dict[str, Any] | None, *args: Any,
                 **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lab, self.django = lab, django

    def spawn(self, instance: str, wrapper: Any = (), **extra: Any) -> Any:
        if self.django:
            extra.setdefault("django", self.django)
        return super().spawn(instance, wrapper=self.lab.wrapper(instance), **extra)


class Rig:
    """A lab, its store, and what the workers need to reach it."""

    def __init__(self, lab: NetLab, url: str, django: dict[str, Any] | None) -> None:
        self.lab, self.url, self.django = lab, url, django

    def cluster(self, made: list[Cluster], tmp_path: Path, jobs: list[dict[str, Any]],
                **options: Any) -> NetProcs:
        cluster = NetProcs(self.lab, self.django, self.url,
                           tmp_path / f"log{len(made)}.jsonl", jobs, options, stop_timeout=5)
        made.append(cluster)
        return cluster

    def history(self, job: str) -> list[dict[str, Any]]:
        return self.lab.history(self.url, job, self.django)


@pytest.fixture(params=STORES)
def rig(request: pytest.FixtureRequest, tmp_path: Path, namespace: str) -> Iterator[Rig]:
    why = lab_missing()
    if why:
        missing(why)
    kind: str = request.param
    lab = NetLab(INSTANCES)
    server: HubRedis | HubPostgres | None = None
    try:
        try:
            server = (HubRedis(lab, kind, tmp_path) if kind in ("redis", "valkey")
                      else HubPostgres(lab))
        except FileNotFoundError as exc:
            missing(str(exc))
        assert server is not None
        django = None
        if kind in ("redis", "valkey"):
            url = f"{server.url}?prefix={namespace}:"
        elif kind == "postgres":
            url = f"{server.url}?table=t_{namespace}"
        else:
            made = json.loads(lab.hub_python("django", namespace,
                                             env={"ANARCHON_POSTGRES_URL": server.url}))
            url, django = made["url"], made["aliases"]
        yield Rig(lab, url, django)
    finally:
        if server is not None:
            server.close()
        lab.close()


def _line(records: Records, kind: str, **match: Any) -> dict[str, Any] | None:
    return first(kind, **match)(records)


def _report(what: str, **numbers: Any) -> None:
    """One measurement line on stdout (``pytest -s``) for the notes and the docs."""
    print(json.dumps(dict(measured=what, **numbers)))


@pytest.mark.parametrize(("lease", "heartbeat"), [(3.0, 0.5)], ids=["lease3s"])
def test_partitioned_runner_stops_before_its_backup_starts(
        rig: Rig, clusters: list[Cluster], tmp_path: Path, lease: float,
        heartbeat: float) -> None:
    _partition_and_heal(rig, clusters, tmp_path, lease, heartbeat)


@pytest.mark.parametrize("rig", ["redis"] + (list(STORES[1:]) if full_run() else []),
                         indirect=True)
def test_partitioned_runner_stops_first_at_the_default_lease(
        rig: Rig, clusters: list[Cluster], tmp_path: Path) -> None:
    _partition_and_heal(rig, clusters, tmp_path, 30.0, 5.0)


def _partition_and_heal(rig: Rig, clusters: list[Cluster], tmp_path: Path, lease: float,
                        heartbeat: float) -> None:
    cluster = rig.cluster(clusters, tmp_path, [
        # still running at the runner's deadline; attempt 2 runs it in full
        dict(kind="at", name="long", when="@go", duration=lease + 4 * heartbeat + 5),
        dict(kind="every", name="tick", when="1s", duration=0.2,
             options=dict(max_late=60)),
    ], lease=lease, heartbeat=heartbeat, jitter=0.1)
    cluster.start_deferred(*INSTANCES)
    run1 = cluster.wait_for(first("begin", job="long", attempt=1), 15, "attempt 1")
    runner = run1["instance"]
    time.sleep(1.5 * heartbeat)  # place the cut between two renewals
    cut_m, cut_t = time.monotonic(), time.time()
    rig.lab.cut(runner)
    cluster.note("fault", runner, fault="link down", m=cut_m)

    run2 = cluster.wait_for(first("begin", job="long", attempt=2), lease + 4 * heartbeat + 10,
                            "attempt 2 on a backup")
    fired = cluster.wait_for(first("abort", job="long", attempt=1, pid=run1["pid"]),
                             lease + 10, "the cut-off runner's signal")
    overlap = fired["m"] - run2["m"]
    _report("partition", store=rig.url.split(":", 1)[0], lease=lease, heartbeat=heartbeat,
            cut_m=cut_m, cut_t=cut_t, signal_m=fired["m"], signal_t=fired["t"],
            backup_start_m=run2["m"], backup_start_t=run2["t"],
            signal_after_cut=fired["m"] - cut_m, backup_after_cut=run2["m"] - cut_m,
            overlap=overlap)
    assert run2["instance"] != runner and run2["reason"] == "takeover"
    assert fired["signal"] == "lost", fired
    assert overlap <= 0, (f"two copies for {overlap:.3f}s: the runner's signal fired at "
                          f"+{fired['m'] - cut_m:.3f}s, the backup started at "
                          f"+{run2['m'] - cut_m:.3f}s after the cut")
    assert fired["m"] - cut_m <= lease, "the runner kept going longer than a lease"

    rig.lab.heal(runner)
    cluster.wait_for(first("event", type="lost", job="long", pid=run1["pid"]), 10,
                     "lost from the runner")
    cluster.wait_for(first("event", type="success", job="long"), 3 * lease + 30,
                     "attempt 2 succeeds")
    healed_m = time.monotonic()
    # the runner is back: it claims ticks again
    cluster.wait_for(lambda lines: [r for r in begins(lines, "tick", instance=runner)
                                    if r["m"] > healed_m], 4 * lease + 10,
                     "the healed runner running ticks")
    records = cluster.records()
    assert [(e["attempt"], e["instance"]) for e in events(records, "success", "long")] == [
        (2, run2["instance"])]
    # nothing the store recorded as finished is started again
    for done in events(records, "success", "tick"):
        again = [r for r in begins(records, "tick", slot=done["slot"]) if r["m"] > done["m"]]
        assert not again, (done, again)
    attempts = {r["attempt"]: r for r in rig.history("long") if not r["manual"]}
    assert attempts[1]["status"] == "interrupted" and attempts[1]["instance"] == runner
    assert attempts[2]["status"] == "success"


@pytest.mark.parametrize("rig", ["redis", "postgres"], indirect=True)
def test_a_partition_shorter_than_the_lease_changes_nothing(
        rig: Rig, clusters: list[Cluster], tmp_path: Path) -> None:
    lease, heartbeat = 3.0, 0.5
    cluster = rig.cluster(clusters, tmp_path, [
        dict(kind="at", name="long", when="@go", duration=2 * lease + 2)],
        lease=lease, heartbeat=heartbeat, jitter=0.1)
    cluster.start_deferred(*INSTANCES)
    run1 = cluster.wait_for(first("begin", job="long", attempt=1), 15, "attempt 1")
    runner = run1["instance"]
    time.sleep(1.5 * heartbeat)
    rig.lab.cut(runner)
    cut_m = time.monotonic()
    time.sleep(lease / 3)  # the fault: well inside the lease
    rig.lab.heal(runner)
    cluster.note("fault", runner, fault="link down", m=cut_m, healed_m=time.monotonic())
    cluster.wait_for(first("event", type="success", job="long"), 2 * lease + 15,
                     "attempt 1 succeeds")
    records = cluster.records()
    assert [(r["attempt"], r["instance"]) for r in begins(records, "long")] == [(1, runner)]
    assert not events(records, "lost", "long")
    assert [(e["attempt"], e["instance"]) for e in events(records, "success", "long")] == [
        (1, runner)]
    assert not _line(records, "abort", job="long")
