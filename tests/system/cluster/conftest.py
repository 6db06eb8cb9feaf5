"""Multi-process tests run on every lease store but the Redis Cluster: the conformance
suite already covers the cluster's key layout, and each process test costs seconds."""

from __future__ import annotations

import pytest

from tests.conftest import STORES, _require
from tests.stores import StoreSpec

#: the stores every cluster test runs on
CLUSTER_STORES = [s for s in STORES if s.lease and s.id != "redis-cluster"]


@pytest.fixture(params=CLUSTER_STORES, ids=lambda s: s.id)
def lease_store(request: pytest.FixtureRequest) -> StoreSpec:
    """A lease store (not the Redis Cluster) whose server answers."""
    spec: StoreSpec = request.param
    _require(spec)
    return spec
