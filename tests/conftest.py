"""Shared fixtures: the stores every suite runs against.

``lease_store`` parametrizes over stores that hold leases, ``any_store`` over all.
A store whose server does not answer is skipped locally and fails the run in CI.

The directory decides the kind of test: ``unit/`` (pure logic, no server), ``contract/``
(the conformance suite over every store), ``integration/`` (real servers, one process),
``system/`` (real processes: clusters, faults, frameworks' beats and workers, examples,
install day). Every test under ``system/`` is marked ``slow`` here; no file marks itself.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from anarchon.backends import Backend, from_url
from tests.stores import StoreSpec, all_stores, in_ci, issued

STORES = all_stores()
SYSTEM = Path(__file__).resolve().parent / "system"


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """``slow`` is decided by directory: every test under ``tests/system/``."""
    for item in items:
        if item.path.is_relative_to(SYSTEM):
            item.add_marker(pytest.mark.slow)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Remove what the session's namespaces left on every store's server."""
    for spec in all_stores(conformance=True):
        namespaces = issued(spec.id)
        if not namespaces or spec.unavailable() is not None:
            continue
        try:
            spec.purge(namespaces)
        except Exception as exc:  # a clean-up must not hide the run's own result
            print(f"\n[tests] could not remove the {spec.id} test data: {exc!r}")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """In CI a skipped test fails: every server and package the suite needs is there."""
    outcome = yield
    report = outcome.get_result()
    if in_ci() and report.skipped and not hasattr(report, "wasxfail"):
        report.outcome = "failed"
        report.longrepr = f"skipped in CI, which must run every test: {report.longrepr}"


def _require(spec: StoreSpec) -> None:
    reason = spec.unavailable()
    if reason is None:
        return
    message = f"{spec.id} server not available: {reason} (start it with scripts/servers.py)"
    if in_ci():
        pytest.fail(f"CI needs every server: {message}", pytrace=False)
    pytest.skip(message)


@pytest.fixture(params=[s for s in STORES if s.lease], ids=lambda s: s.id)
def lease_store(request: pytest.FixtureRequest) -> StoreSpec:
    """A store with leases whose server answers."""
    spec: StoreSpec = request.param
    _require(spec)
    return spec


def only_lease_stores(*ids: str) -> pytest.MarkDecorator:
    """Run a test using ``lease_store`` (or ``make_backend``) on these stores only, so a
    test that does not apply to a store is not collected for it (rather than skipped,
    which fails CI). Conformance-only stores are chosen only where named (their
    suites' ``lease_store`` is the one in ``tests/contract/conftest.py``)."""
    chosen = [s for s in all_stores(conformance=True) if s.lease and s.id in ids]
    missing = set(ids) - {s.id for s in chosen}
    if missing:
        raise ValueError(f"no lease stores named {sorted(missing)}")
    return pytest.mark.parametrize("lease_store", chosen, indirect=True, ids=lambda s: s.id)


@pytest.fixture
def namespace() -> str:
    """A fresh namespace (prefix, table) so tests never see each other's data."""
    return "ns_" + uuid.uuid4().hex[:12]


@pytest.fixture
def store_url(lease_store: StoreSpec, namespace: str) -> str:
    """The backend URL for this test's namespace on the current lease store."""
    return lease_store.url_for(namespace)


@pytest.fixture
def make_backend(store_url: str) -> Callable[[], Backend]:
    """Builds a new backend (its own connection) on this test's namespace."""
    return lambda: from_url(store_url)
