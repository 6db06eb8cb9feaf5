"""Fixtures of the fault suite: clusters of real instance processes on a real store.

The instances are ``anarchon_lab.scenarios.worker`` processes (the same ones ``anarchon
scenarios`` runs); every handler start/end, event and injected fault is one JSON line in
a shared log, read back with :mod:`anarchon_lab.scenarios.measure`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import STORES
from tests.harness.cluster import Cluster
from tests.stores import StoreSpec, in_ci

LEASE, HEARTBEAT, JITTER = 2.0, 0.3, 0.1
OPTIONS = dict(lease=LEASE, heartbeat=HEARTBEAT, jitter=JITTER)

#: stores the long fault tests (storm, outage) run on in CI; all of them by hand
CI_SUBSET = ("redis", "postgres", "sqlite")

MakeCluster = Callable[..., Cluster]


def full_run() -> bool:
    """``ANARCHON_FAULTS_FULL=1`` runs the long fault tests on every lease store."""
    return os.environ.get("ANARCHON_FAULTS_FULL", "") not in ("", "0")


def long_stores(*excluded: str) -> list[StoreSpec]:
    """Lease stores a long fault test runs on: :data:`CI_SUBSET`, or all of them with
    ``ANARCHON_FAULTS_FULL=1`` (never skipped: CI fails on skips)."""
    return [s for s in STORES if s.lease and s.id not in excluded
            and (full_run() or s.id in CI_SUBSET)]


def missing(what: str) -> None:
    """A tool the test needs is absent: skip locally, fail in CI."""
    if in_ci():
        pytest.fail(f"CI needs {what}", pytrace=False)
    pytest.skip(f"{what} not available")


@pytest.fixture
def make_cluster(tmp_path: Path) -> Iterator[MakeCluster]:
    """``make_cluster(url, jobs, **options)``: a cluster stopped (SIGKILL) at teardown."""
    made: list[Cluster] = []

    def make(url: str, jobs: list[dict[str, Any]], **options: Any) -> Cluster:
        cluster = Cluster(url, tmp_path / f"log{len(made)}.jsonl", jobs,
                          {**OPTIONS, **options}, stop_timeout=5)
        made.append(cluster)
        return cluster

    yield make
    for cluster in made:
        cluster.stop_all(graceful=False)


@pytest.fixture
def clusters() -> Iterator[list[Cluster]]:
    """A list a test appends its clusters to; each is stopped (SIGKILL) at teardown."""
    made: list[Cluster] = []
    yield made
    for cluster in made:
        cluster.stop_all(graceful=False)
