"""Instances killed (mostly SIGKILL, some SIGTERM) and restarted at random with a 1 s job.

Counts, printed for the report: slots started twice *concurrently* (must be 0: no freeze
is injected here), slots lost while at least one instance was up (must be 0 on lease
backends), and slots whose crashed run was replaced by a later slot (docs/contract.md,
*Claims, leases and fencing*: a run still unfinished after its lease expired is marked
interrupted when the next slot is claimed, if no backup took it over first; reported, not
failed). The job uses ``overlap="allow"`` so a crashed run's lease does not make the next
slot skip (an ``overlap`` skip is a deliberate decision, not a loss) and
``max_attempts=10`` so repeated crashes of one slot's runners do not exhaust it.

``ANARCHON_STORM_SECONDS`` (default 30) sets the storm's length; run it for 60 s by hand.
"""

from __future__ import annotations

import os
import random
import signal
import time
from collections import defaultdict

import pytest

from tests.conftest import _require
from tests.harness.checks import concurrent_same_slot, history
from tests.harness.cluster import Records
from tests.stores import StoreSpec
from tests.system.faults.conftest import LEASE, MakeCluster, long_stores

STORM = float(os.environ.get("ANARCHON_STORM_SECONDS", "30"))
INSTANCES = ("a", "b", "c")


def _up_intervals(records: Records, now: float) -> list[tuple[float, float]]:
    """When each process was up: from its ``ready`` line to its kill, signal or exit."""
    ready: dict[int, float] = {}
    down: dict[int, float] = {}
    for r in records:
        t = float(r["t"])
        if r["kind"] == "ready":
            ready[r["pid"]] = t
        elif r["kind"] in ("fault", "signal", "exit") and r.get("pid") is not None:
            down.setdefault(r["pid"], t)
    return [(t, down.get(pid, now)) for pid, t in ready.items()]



@pytest.fixture(params=long_stores(), ids=lambda s: s.id)
def lease_store(request: pytest.FixtureRequest) -> StoreSpec:
    """The long fault test's stores (see :func:`tests.system.faults.conftest.long_stores`)."""
    spec: StoreSpec = request.param
    _require(spec)
    return spec


def test_restart_storm(lease_store: StoreSpec, store_url: str,
                       make_cluster: MakeCluster) -> None:
    seed = int(os.environ.get("ANARCHON_STORM_SEED") or time.time())
    rng = random.Random(seed)
    cluster = make_cluster(store_url, [dict(
        kind="every", name="tick", when="1s", duration=0.5,
        options=dict(overlap="allow", max_attempts=10, history_size=1000))])
    began = cluster.start(*INSTANCES)
    kills = terms = 0
    ends = began + STORM
    while time.time() < ends:
        time.sleep(rng.uniform(0.7, 2.5))  # the storm's random rhythm, not a wait for state
        records = cluster.records()
        up = [i for i in INSTANCES if cluster.alive(i) and any(
            r["kind"] == "ready" and r["pid"] == cluster.procs[i].pid for r in records)]
        if len(up) < 2:
            continue  # keep at least one instance up at every moment
        victim = rng.choice(up)
        if rng.random() < 0.75:
            cluster.kill(victim)
            kills += 1
        else:
            cluster.signal(victim, signal.SIGTERM)
            cluster.wait_exit(victim, 10)
            terms += 1
        cluster.spawn(victim)
    stopped = time.time()
    # settle: everyone up again, and long enough for any crashed run to be taken over
    cluster.wait_for(lambda lines: all(any(r["kind"] == "ready" and r["pid"] == p.pid
                                           for r in lines) for p in cluster.procs.values()),
                     20, "all instances ready")
    time.sleep(LEASE + 3)  # the takeover bound (lease + 2 heartbeats) plus a run
    records = cluster.records()
    records_now = time.time()
    attempts = history(store_url, "tick")
    done = {r.slot for r in attempts if r.status == "success"}

    intervals = _up_intervals(records, records_now)
    covered = []
    slot = (int(began) + 2) * 1000
    while slot <= stopped * 1000:
        s = slot / 1000
        if any(a <= s - 0.1 and b >= s + 1.0 for a, b in intervals):
            covered.append(slot)
        slot += 1000
    # docs/contract.md (*Claims, leases and fencing*): a crashed run still unfinished when
    # a later slot is claimed after its lease expired is marked interrupted and replaced
    # by that slot (a documented outcome, like an overlap skip); anything else without a
    # success is a lost slot
    finished: defaultdict[int, list[str]] = defaultdict(list)
    for record in attempts:
        finished[record.slot].append(record.status)
    replaced = [s for s in covered if s not in done and finished[s]
                and set(finished[s]) == {"interrupted"}]
    lost = [s for s in covered if s not in done and s not in replaced]
    twice = concurrent_same_slot(records, "tick")
    print(f"\nSTORM store={lease_store.id} seconds={STORM:g} seed={seed} kills={kills} "
          f"sigterms={terms} slots_with_an_instance_up={len(covered)} "
          f"started_twice_concurrently={len({a.slot for a, _ in twice})} "
          f"replaced_by_a_later_slot={len(replaced)} slots_lost={len(lost)}")
    assert not twice, f"slots started twice concurrently (seed {seed}): {twice}"
    assert not lost, (f"slots lost while an instance was up (seed {seed}): {lost}; log: "
                      f"{[r for r in records if r.get('slot') in lost]}; history: "
                      f"{[r for r in attempts if r.slot in lost]}; "
                      f"faults: {[r for r in records if r['kind'] in ('fault', 'ready')]}")
    assert len(covered) >= STORM * 0.5
