"""Stores the test suites run against.

Each store module in this package defines ``STORE: StoreSpec``. A spec turns a unique
namespace into a backend URL that :func:`anarchon.backends.from_url` understands, so the
same backend can be rebuilt inside cluster worker processes. Every namespace handed out is
remembered, and when the session ends each store removes what those namespaces left on its
server (keys, tables, files, queues, streams): see ``pytest_sessionfinish`` in
``tests/conftest.py``. Servers are found through
environment variables (set by ``scripts/servers.py``); no test assumes a standard port.

In CI (``CI`` set) a store whose server does not answer fails the tests instead of
skipping them.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass

_ISSUED: defaultdict[str, set[str]] = defaultdict(set)


def remember(store_id: str, namespace: str) -> None:
    """Note that ``namespace`` was used on ``store_id`` (purged when the session ends)."""
    _ISSUED[store_id].add(namespace)


def issued(store_id: str) -> set[str]:
    """The namespaces used on ``store_id`` so far."""
    return set(_ISSUED.get(store_id, ()))


def _keep(namespaces: set[str]) -> None:
    """A store that leaves nothing behind (or whose data expires by itself)."""


@dataclass(frozen=True)
class StoreSpec:
    """How tests reach one store."""

    id: str
    #: namespace (unique per test) -> backend URL for ``from_url``
    make_url: Callable[[str], str]
    #: True for lease backends (the full conformance suite), False for claim-only
    lease: bool
    #: None when the server answers, else why not
    unavailable: Callable[[], str | None]
    #: removes everything these namespaces created on the server
    purge: Callable[[set[str]], None] = _keep
    #: only the conformance suites use it (e.g. a store that needs a configured Django)
    conformance_only: bool = False

    def url_for(self, namespace: str) -> str:
        """The backend URL of ``namespace``, remembered so the session end purges it."""
        remember(self.id, namespace)
        return self.make_url(namespace)


def all_stores(conformance: bool = False) -> list[StoreSpec]:
    """Every ``STORE`` defined by a module of this package, sorted by id; the
    ``conformance_only`` ones only with ``conformance=True``."""
    specs = []
    for info in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{info.name}")
        spec = getattr(module, "STORE", None)
        if isinstance(spec, StoreSpec) and (conformance or not spec.conformance_only):
            specs.append(spec)
    return sorted(specs, key=lambda s: s.id)


def not_set(variable: str) -> str:
    """Why a store whose URL variable is empty cannot be reached."""
    return (f"{variable} is not set (run the tests with scripts/test.sh, or start servers "
            "with python scripts/servers.py start and source .servers.env)")


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() not in ("", "0", "false", "no")
