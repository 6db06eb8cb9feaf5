"""``anarchon-dramatiq --metrics --metrics-port PORT`` (docs/frameworks/dramatiq.md): two
real scheduler processes of the ``control`` scenario (``tick`` and ``clock`` every 1 s,
untracked: a run ends when its message is sent) on the Redis broker and a Redis store,
each serving ``/metrics``. Scraped over HTTP, every documented metric family is there,
each instance's ``anarchon_runs_total`` equals the successes the store's history holds
for that instance, and ``anarchon_instances_alive`` counts both."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from anarchon import AsyncScheduler, from_url
from tests.harness.dramatiq.rig import Rig
from tests.system.observability.test_health import get
from tests.system.observability.test_metrics import free_port
from tests.system.observability.test_scrape_counts import agree

#: the families docs/operations.md lists (counters without their ``_total``)
DOCUMENTED = {"anarchon_runs", "anarchon_slot_skips", "anarchon_claims",
              "anarchon_takeovers", "anarchon_start_delay_seconds",
              "anarchon_run_duration_seconds", "anarchon_store_errors",
              "anarchon_store_call_seconds", "anarchon_leases_held",
              "anarchon_jobs_registered", "anarchon_instances_alive"}
INSTANCES = ("sched-a", "sched-b")


@pytest.fixture
def rig(tmp_path: Path, broker_kind: str, namespace: str, store: str) -> Iterator[Rig]:
    made = Rig(tmp_path, broker_kind, namespace, store, "control")
    yield made
    made.stop()


def scrape(port: int) -> dict[str, Any]:
    """Family name -> its samples as {(sample name, sorted labels): value}."""
    families: dict[str, Any] = {}
    for family in text_string_to_metric_families(get(port, "/metrics")[1]):
        families[family.name] = {
            (s.name, tuple(sorted(s.labels.items()))): s.value for s in family.samples}
    return families


def value(port: int, sample: str, **labels: str) -> float:
    for samples in scrape(port).values():
        found = samples.get((sample, tuple(sorted(labels.items()))))
        if found is not None:
            return float(found)
    return 0.0


def sent_by(store: str, instance: str) -> float:
    """Successful runs of ``clock`` that ``instance`` recorded in the store's history."""
    async def main() -> float:
        reader = AsyncScheduler(from_url(store))
        try:
            records = await reader.history("clock", 500)
        finally:
            await reader.backend.close()
        return float(sum(1 for r in records
                         if r.status == "success" and r.instance_id == instance))

    return asyncio.run(main())


@pytest.mark.parametrize("broker_kind", ["redis"], indirect=True)
def test_anarchon_dramatiq_serves_its_metrics(rig: Rig, store: str) -> None:
    ports = {name: free_port() for name in INSTANCES}
    rig.schedulers(*INSTANCES, extra={
        name: ["--metrics", "--metrics-port", str(port)] for name, port in ports.items()})
    for name, port in ports.items():  # each counts the sends it made, as history does
        agree(partial(value, port, "anarchon_runs_total", job="clock", outcome="success"),
              partial(sent_by, store, name), 30)
    deadline = time.monotonic() + 10  # both beat within a heartbeat (0.3 s) of starting
    while any(value(port, "anarchon_instances_alive") != 2 for port in ports.values()):
        assert time.monotonic() < deadline, {n: scrape(p) for n, p in ports.items()}
        time.sleep(0.2)
    for name, port in ports.items():
        families = scrape(port)
        assert set(families) >= DOCUMENTED, (name, sorted(families))
        runs = value(port, "anarchon_runs_total", job="clock", outcome="success")
        assert value(port, "anarchon_run_duration_seconds_count", job="clock") >= runs - 1
        assert value(port, "anarchon_claims_total", result="won") >= runs
        assert value(port, "anarchon_start_delay_seconds_count") >= runs
        assert value(port, "anarchon_jobs_registered") == 2.0  # tick and clock
        assert 0 <= value(port, "anarchon_leases_held") <= 2
        beats = value(port, "anarchon_store_call_seconds_count", operation="heartbeat_live")
        assert beats >= 1, families["anarchon_store_call_seconds"]
        assert not any(v for v in families["anarchon_store_errors"].values()), families
        assert value(port, "anarchon_runs_total", job="clock", outcome="failure") == 0
