"""The conformance suites also run on the conformance-only stores (the ``"django"``
backend on each database), which the cluster, fault and end-to-end suites leave out."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from anarchon.backends.base import Backend
from tests.conftest import _require
from tests.stores import StoreSpec, all_stores


@pytest.fixture(params=[s for s in all_stores(conformance=True) if s.lease],
                ids=lambda s: s.id)
def lease_store(request: pytest.FixtureRequest) -> StoreSpec:
    """A store with leases whose server answers (conformance-only stores included)."""
    spec: StoreSpec = request.param
    _require(spec)
    return spec


@pytest.fixture
def backend_factory(make_backend: Callable[[], Backend]) -> Callable[[], Backend]:
    """The fixture ``anarchon.testing``'s suites take: this test's store and namespace."""
    return make_backend
