"""One instance's wall clock runs 2 s ahead (``OffsetClock``): slots are still claimed once.

The skewed instance computes the same slots but reaches each one 2 s early; the store's
clock decides lateness, and an early claim is not refused, so that instance tends to win
every slot — early, but once (documented in docs/guarantees.md).
"""

from __future__ import annotations

from collections import Counter

from tests.harness.checks import begins, concurrent_same_slot
from tests.system.faults.conftest import MakeCluster


def test_two_second_skew_still_claims_each_slot_once(store_url: str,
                                                     make_cluster: MakeCluster) -> None:
    cluster = make_cluster(store_url, [dict(kind="every", name="tick", when="1s",
                                            duration=0.2)])
    cluster.start("ahead", clock_offset=2.0)
    ready = cluster.start("b", "c")
    cluster.wait_for(lambda lines: len({r["slot"] for r in begins(lines, "tick")
                                        if r["t"] > ready + 1}) >= 6, 20, "six slots")
    cluster.stop_all()
    records = cluster.records()
    runs = [r for r in begins(records, "tick") if r["t"] > ready + 1]
    starts = Counter(r["slot"] for r in runs)
    assert set(starts.values()) == {1}, f"a slot started twice: {starts}"
    slots = sorted(starts)
    assert slots == list(range(slots[0], slots[-1] + 1000, 1000)), "a slot was lost"
    assert not concurrent_same_slot(records, "tick")
