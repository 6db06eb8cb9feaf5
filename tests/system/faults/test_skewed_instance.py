"""Issue 15, finding 4: one of three instances 2 s ahead or behind loses no slot.

The skewed instance's engine reads an offset wall clock (an injected ``clock=``, or the
whole process under ``faketime``); the store's clock is right. It is either up from the
start or joins a running cluster; joining, it starts 0.3 s after a whole second, while
the previous slot's run (0.7 s) is still executing, the moment a 2 s-ahead catch-up claim
of a slot that has not arrived yet meets an ``overlap`` and that slot is lost.

Asserted over every slot from the first instance's ``ready`` to the end when the skewed
instance joins (not only from "ready + 1 s"), and over the steady state when it is up from
the start: each slot starts exactly once, none is lost, and none starts before its time by
the store's clock (tolerance 0.5 s: the store refuses claims more than 250 ms early).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import _require
from tests.harness.cluster import Cluster, WorkerCluster
from tests.harness.faults import (
    begins,
    faketime_command,
    make_workers,
    skips,
    starts_per_slot,
    tick,
)
from tests.stores import StoreSpec
from tests.system.faults.conftest import long_stores

# serial: tight timings but little CPU, so scripts/test.sh runs it apart from the
# CPU-heavy system tests; it runs instances under faketime
pytestmark = pytest.mark.serial


SKEW = 2.0
EARLY = 0.5       # a start this much before its slot (store clock) is early
RUN = 0.7         # each run lasts this long: a join lands on a running one
JOIN_AT = 0.3     # the skewed instance starts at this fraction of a second
SLOTS = 8         # slots watched once every instance is up



@pytest.fixture(params=long_stores(), ids=lambda s: s.id)
def lease_store(request: pytest.FixtureRequest) -> StoreSpec:
    """The long fault tests' stores (see :func:`tests.system.faults.conftest.long_stores`)."""
    spec: StoreSpec = request.param
    _require(spec)
    return spec


def watch(cluster: WorkerCluster, joins: bool, **skewed: Any) -> tuple[dict[str, Any], list[str]]:
    """Start ``skewed`` (spawn options; ``b`` and ``c`` are up, or started with it), wait
    :data:`SLOTS` slots, and return the figures and what went wrong.

    Joining, every slot from the first ``ready`` counts (the join is the point). Up from
    the start, the slots once all three are up and the skew has passed count: before that
    a 2 s-behind instance is alone with slots nobody claimed yet, which is a start-up
    race of its own, not what this test measures."""
    cluster.start("skewed", timeout=30, start_at=JOIN_AT, **skewed)
    cluster.wait_for(lambda lines: {r["instance"] for r in lines if r["kind"] == "ready"}
                     >= set(cluster.procs), 30, "every instance ready")
    readies = [r["t"] for r in cluster.records() if r["kind"] == "ready"]
    since = min(readies) if joins else max(readies) + SKEW
    watched = max(readies) if joins else since
    cluster.wait_for(lambda lines: len({r["slot"] for r in begins(lines, "tick")
                                        if r["slot"] / 1000 > watched}) >= SLOTS,
                     SLOTS + 15, f"{SLOTS} slots after every instance was up")
    end = time.time()
    records = cluster.records()
    starts = starts_per_slot(records, "tick")
    # every slot from the first start to the last one whose claim is surely out
    expected = range((int(since) + 1) * 1000, int(end - 1.5) * 1000 + 1, 1000)
    runs = begins(records, "tick")
    early = [(r["slot"], round(r["t"] - r["slot"] / 1000, 2)) for r in runs
             if r["t"] < r["slot"] / 1000 - EARLY]
    found = dict(
        slots=len(expected), lost=[s for s in expected if s not in starts],
        twice={s: n for s, n in starts.items() if n > 1},
        early=len(early), worst_early=min((e for _, e in early), default=None),
        won_by_skewed=sum(r["instance"] == "skewed" for r in runs if r["slot"] in expected),
        overlap_skips=sorted(set(skips(records, "tick", "overlap"))),
        dead=cluster.dead())
    problems = [f"{key}: {found[key]}" for key in ("lost", "twice", "early", "dead")
                if found[key]]
    return found, problems


def _cluster(clusters: list[Cluster], store_url: str, tmp_path: Path) -> WorkerCluster:
    return make_workers(clusters, store_url, tmp_path, [tick(duration=RUN)])


@pytest.mark.parametrize("offset", [
    pytest.param(SKEW, id="ahead"),
    pytest.param(-SKEW, id="behind"),
])
@pytest.mark.parametrize("joins", ["from-start", "later"])
def test_skewed_instance_loses_no_slot(store_url: str, clusters: list[Cluster],
                                       tmp_path: Path, offset: float, joins: str,
                                       request: pytest.FixtureRequest) -> None:
    cluster = _cluster(clusters, store_url, tmp_path)
    if joins == "later":
        cluster.start("b", "c")
        cluster.wait_for(lambda lines: len(begins(lines, "tick")) >= 3, 15, "three slots")
    else:
        for name in ("b", "c"):
            cluster.spawn(name)
    found, problems = watch(cluster, joins == "later", clock_offset=offset)
    print(f"\nSKEW {request.node.callspec.id} {found}")
    assert not problems, f"{problems}; figures: {found}"


@pytest.fixture(params=long_stores("sqlite"), ids=lambda s: s.id)
def server_store(request: pytest.FixtureRequest) -> StoreSpec:
    """A lease store with a server of its own: under ``faketime`` SQLite's clock (the
    instance's) would be skewed too."""
    spec: StoreSpec = request.param
    _require(spec)
    return spec


def test_faketime_instance_ahead_joining_later(server_store: StoreSpec, namespace: str,
                                               clusters: list[Cluster],
                                               tmp_path: Path) -> None:
    """The same with a real process under ``faketime +2`` (Debian package ``faketime``):
    its whole process clock is ahead, not only the engine's."""
    wrapper = ["env", "FAKETIME_DONT_FAKE_MONOTONIC=1", *faketime_command(),
               "-f", f"+{SKEW:g}"]
    cluster = _cluster(clusters, server_store.url_for(namespace), tmp_path)
    cluster.start("b", "c")
    cluster.wait_for(lambda lines: len(begins(lines, "tick")) >= 3, 15, "three slots")
    found, problems = watch(cluster, True, wrapper=wrapper, faked_offset=SKEW)
    print(f"\nFAKETIME {server_store.id} {found}")
    assert not problems, f"{problems}; figures: {found}"
