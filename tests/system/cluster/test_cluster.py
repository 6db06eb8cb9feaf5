"""Real processes sharing a real store: the guarantees under signals and crashes.

Short timings (lease 2 s, heartbeat 0.3 s) keep each test to seconds.
"""

from __future__ import annotations

import itertools
import signal
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.harness.cluster import JobCluster, first

LEASE, HEARTBEAT = 2.0, 0.3
OPTIONS = dict(lease=LEASE, heartbeat=HEARTBEAT, jitter=0.1)


@pytest.fixture
def make_cluster(store_url: str, tmp_path: Path) -> Iterator[Any]:
    made: list[JobCluster] = []

    def make(job: dict[str, Any], **options: Any) -> JobCluster:
        cluster = JobCluster(store_url, tmp_path / f"log{len(made)}.jsonl", job,
                          {**OPTIONS, **options})
        made.append(cluster)
        return cluster

    yield make
    for cluster in made:
        cluster.stop_all()


def at_job(lead: float = 4.0, **fields: Any) -> dict[str, Any]:
    """A one-off job at a whole second ``lead`` seconds away, the same for every process."""
    return dict(kind="at", name="once", when=int(time.time() + lead) + 1, **fields)


def begins(cluster: JobCluster) -> list[dict[str, Any]]:
    return [r for r in cluster.records() if r["kind"] == "begin"]


def test_three_instances_start_each_slot_once(make_cluster: Any) -> None:
    cluster = make_cluster(dict(kind="every", name="tick", when="1s", duration=0.2))
    cluster.start("a", "b", "c")
    cluster.wait_for(lambda lines: len({r["slot"] for r in lines if r["kind"] == "begin"}) >= 6,
                     20, "six slots")
    cluster.stop_all()
    starts = Counter(r["slot"] for r in begins(cluster))
    assert set(starts.values()) == {1}, starts
    # slots before the instances were up are caught up (the newest only), and a run that
    # started late may make the next slot skip as overlap: neither is a lost slot
    slots = sorted({r["slot"] for r in begins(cluster) if r["reason"] != "catch-up"}
                   | {e["slot"] for e in cluster.events("skip") if e["reason"] == "overlap"})
    assert slots == list(range(slots[0], slots[-1] + 1, 1000)), "a slot was lost"
    assert {r["instance"] for r in begins(cluster)} <= {"a", "b", "c"}


def test_sigint_hands_over_within_two_heartbeats(make_cluster: Any) -> None:
    cluster = make_cluster(at_job(duration=20))
    cluster.start("a", "b", "c")
    winner = cluster.wait_for(first("begin", attempt=1), 10, "attempt 1")
    sent = cluster.signal(winner["instance"], signal.SIGINT)
    took = cluster.wait_for(first("begin", attempt=2), 10, "attempt 2")
    assert took["reason"] == "takeover"
    assert took["instance"] != winner["instance"]
    assert took["t"] - sent < 2 * HEARTBEAT + 0.7
    cluster.wait_for(first("exit", instance=winner["instance"]), 10, "the runner's exit")


def test_sigkill_takeover_within_lease_plus_two_heartbeats(make_cluster: Any) -> None:
    cluster = make_cluster(at_job(duration=20))
    cluster.start("a", "b", "c")
    winner = cluster.wait_for(first("begin", attempt=1), 10, "attempt 1")
    killed = cluster.signal(winner["instance"], signal.SIGKILL)
    took = cluster.wait_for(first("begin", attempt=2), LEASE + 5, "attempt 2")
    assert took["reason"] == "takeover"
    assert took["t"] - killed <= LEASE + 2 * HEARTBEAT + 0.5


def test_frozen_runner_loses_its_lease(make_cluster: Any) -> None:
    cluster = make_cluster(at_job(duration=8))
    cluster.start("a", "b")
    winner = cluster.wait_for(first("begin", attempt=1), 10, "attempt 1")
    cluster.signal(winner["instance"], signal.SIGSTOP)
    took = cluster.wait_for(first("begin", attempt=2), LEASE + 5, "attempt 2")
    assert took["instance"] != winner["instance"]
    cluster.signal(winner["instance"], signal.SIGCONT)
    lost = cluster.wait_for(first("event", type="lost", instance=winner["instance"]), 5, "lost")
    assert lost["attempt"] == 1
    ended = cluster.wait_for(first("end", instance=winner["instance"]), 5, "the frozen run")
    assert ended["signal"] == "lost"
    cluster.wait_for(first("event", type="success"), 15, "attempt 2 succeeds")
    successes = cluster.events("success")
    assert [(e["attempt"], e["instance"]) for e in successes] == [(2, took["instance"])]


def test_all_down_at_the_slot_is_caught_up(make_cluster: Any) -> None:
    job = dict(kind="every", name="report", when="2s", duration=0.1,
               options=dict(catch_up=30))
    cluster = make_cluster(job)
    cluster.start("a", "b")
    done = cluster.wait_for(first("event", type="success"), 10, "a first run")
    for name in ("a", "b"):
        cluster.signal(name, signal.SIGKILL)
    time.sleep(2.5)  # the job's next slot passes while every instance is down
    before = {r["slot"] for r in begins(cluster)}
    cluster.start("c")
    caught = cluster.wait_for(first("begin", reason="catch-up", instance="c"), 10, "catch-up")
    assert caught["slot"] > done["slot"]
    assert caught["slot"] not in before  # a slot nobody had started


def test_overlap_skip_across_processes(make_cluster: Any) -> None:
    cluster = make_cluster(dict(kind="every", name="slow", when="1s", duration=2.5))
    cluster.start("a", "b", "c")
    cluster.wait_for(lambda lines: sum(r["kind"] == "end" for r in lines) >= 2, 20, "two runs")
    cluster.stop_all()
    spans = []
    records = cluster.records()
    for begin in (r for r in records if r["kind"] == "begin"):
        end = next((r["t"] for r in records if r["kind"] == "end" and r["slot"] == begin["slot"]
                    and r["attempt"] == begin["attempt"]), float("inf"))
        spans.append((begin["t"], end))
    spans.sort()
    assert all(prev_end <= start for (_, prev_end), (start, _) in itertools.pairwise(spans))
    assert any(e["reason"] == "overlap" for e in cluster.events("skip"))


def test_max_attempts_exhausted_after_crash(make_cluster: Any) -> None:
    cluster = make_cluster(at_job(duration=20, options=dict(max_attempts=1)))
    cluster.start("a", "b")
    winner = cluster.wait_for(first("begin", attempt=1), 10, "attempt 1")
    cluster.signal(winner["instance"], signal.SIGKILL)
    time.sleep(LEASE + 3 * HEARTBEAT + 0.5)  # a takeover would have happened by now
    assert not [r for r in begins(cluster) if r["attempt"] > 1]
