"""The store conformance suites, for any backend: a store proves itself with one fixture.

In a test module of the store's own project::

    import pytest
    from anarchon.testing.claims import *   # noqa: F403  (every lease store)
    from anarchon.testing.records import *  # noqa: F403  (every lease store)
    from anarchon.testing.triggers import *  # noqa: F403  (a TriggerStore)
    from anarchon.testing.control import *  # noqa: F403  (a ControlStore)
    from anarchon.testing.values import *  # noqa: F403  (a ValueStore)

    @pytest.fixture
    def backend_factory():
        namespace = fresh_namespace()  # one per test: the tests never see each other
        return lambda: MyBackend(..., prefix=namespace)

``backend_factory`` returns a callable that builds a new, unopened backend (a
connection of its own) on the same fresh namespace each time it is called; the tests
open and close what they build. Each module holds the tests of one part of the contract
(``docs/contract.md``; the page *Writing a store* says more). pytest is needed
(``pip install "anarchon[testing]"``); the core never imports this package.
"""

from __future__ import annotations

try:
    import pytest
except ImportError as exc:  # pragma: no cover - pytest is in the testing extra
    raise ImportError('anarchon.testing needs pytest: pip install "anarchon[testing]"'
                      ) from exc

# plain asserts in the suites report their values as in the user's own tests
pytest.register_assert_rewrite("anarchon.testing.claims", "anarchon.testing.records",
                               "anarchon.testing.triggers", "anarchon.testing.control",
                               "anarchon.testing.values", "anarchon.testing.support")

SUITES = ("claims", "records", "triggers", "control", "values")

__all__ = ["SUITES"]
