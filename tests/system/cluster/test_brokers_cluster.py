"""Three real processes on a claim-only broker (RabbitMQ, NATS): one start per slot.

Uses the shared cluster harness and worker unchanged; claim-only backends take no
``lease``/``heartbeat``, so the instances get only a short ``jitter``.
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.harness.cluster import JobCluster
from tests.harness.procs import ROOT, child_env
from tests.stores import StoreSpec, in_ci
from tests.stores import nats as nats_store
from tests.stores import rabbitmq as rabbitmq_store
from tests.support import run

BROKERS = {"rabbitmq": rabbitmq_store, "nats": nats_store}
SLOTS = 12


@pytest.fixture(params=sorted(BROKERS))
def broker(request: pytest.FixtureRequest, namespace: str) -> Iterator[tuple[StoreSpec, str]]:
    module = BROKERS[request.param]
    spec: StoreSpec = module.STORE
    reason = spec.unavailable()
    if reason is not None:
        if in_ci():
            pytest.fail(f"CI needs every server: {spec.id}: {reason}", pytrace=False)
        pytest.skip(f"{spec.id} server not available: {reason}")
    yield spec, spec.url_for(namespace)
    run(module.cleanup(namespace, ["tick"]))


@pytest.fixture
def cluster(broker: tuple[StoreSpec, str], tmp_path: Path) -> Iterator[JobCluster]:
    _, url = broker
    made = JobCluster(url, tmp_path / "log.jsonl",
                   dict(kind="every", name="tick", when="1s", duration=0.2),
                   dict(jitter=0.2))
    yield made
    made.stop_all()


def begins(cluster: JobCluster) -> list[dict[str, Any]]:
    return [r for r in cluster.records() if r["kind"] == "begin"]


def test_three_processes_start_each_slot_exactly_once(cluster: JobCluster) -> None:
    cluster.start("a", "b", "c")
    cluster.wait_for(lambda lines: len({r["slot"] for r in lines if r["kind"] == "begin"})
                     >= SLOTS, SLOTS + 20, f"{SLOTS} slots")
    cluster.stop_all()
    starts = Counter(r["slot"] for r in begins(cluster))
    assert set(starts.values()) == {1}, starts
    slots = sorted(starts)
    assert slots == list(range(slots[0], slots[-1] + 1, 1000)), "a slot was lost"
    assert not cluster.events("error"), cluster.events("error")
    taken = Counter(e["slot"] for e in cluster.events("skip") if e["reason"] == "taken")
    assert all(taken[slot] == 2 for slot in slots[1:-1]), taken  # all three were up
    assert all(r["attempt"] == 1 and r["reason"] == "scheduled" for r in begins(cluster))


def test_killed_instance_does_not_cause_duplicates(cluster: JobCluster) -> None:
    cluster.start("a", "b", "c")
    cluster.wait_for(lambda lines: len(begins(cluster)) >= 3, 15, "three slots")
    cluster.signal("a", signal.SIGKILL)
    killed_at = max(r["slot"] for r in begins(cluster))
    cluster.wait_for(lambda lines: sum(r["slot"] > killed_at + 2000 for r in begins(cluster))
                     >= 4, 20, "four slots after the kill")
    cluster.stop_all()
    starts = Counter(r["slot"] for r in begins(cluster))
    assert set(starts.values()) == {1}, starts
    later = [r for r in begins(cluster) if r["slot"] > killed_at + 2000]
    assert {r["instance"] for r in later} <= {"b", "c"}


def test_outbox_example_sends_each_row_once(broker: tuple[StoreSpec, str],
                                            tmp_path: Path) -> None:
    spec, _ = broker
    env = child_env(ANARCHON_BROKER=spec.id, OUTBOX_DB=str(tmp_path / "outbox.db"))
    command = [sys.executable, str(ROOT / "examples" / "broker_notifications.py"),
               "--seconds", "5"]
    procs = [subprocess.Popen(command, env=env, stdout=subprocess.PIPE, text=True)
             for _ in range(2)]
    outputs = [proc.communicate(timeout=60)[0] for proc in procs]
    assert [proc.returncode for proc in procs] == [0, 0], outputs
    text = "".join(outputs)
    sent = re.findall(r"sent #(\d+) to", text)
    assert sorted(sent) == [str(n) for n in range(1, 7)], text  # each row once, by one
    assert "skipped (taken" in text
