"""Stores the test suites run against.

Each store module in this package defines ``STORE: StoreSpec``. A spec turns a unique
namespace into a backend URL that :func:`anarchon.backends.from_url` understands, so the
same backend can be rebuilt inside cluster worker processes. Servers are found through
environment variables (set by ``scripts/servers.py``); no test assumes a standard port.

In CI (``CI`` set) a store whose server does not answer fails the tests instead of
skipping them.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class StoreSpec:
    """How tests reach one store."""

    id: str
    #: namespace (unique per test) -> backend URL for ``from_url``
    url_for: Callable[[str], str]
    #: True for lease backends (the full conformance suite), False for claim-only
    lease: bool
    #: None when the server answers, else why not
    unavailable: Callable[[], str | None]


def all_stores() -> list[StoreSpec]:
    """Every ``STORE`` defined by a module of this package, sorted by id."""
    specs = []
    for info in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{info.name}")
        spec = getattr(module, "STORE", None)
        if isinstance(spec, StoreSpec):
            specs.append(spec)
    return sorted(specs, key=lambda s: s.id)


def not_set(variable: str) -> str:
    """Why a store whose URL variable is empty cannot be reached."""
    return (f"{variable} is not set (run the tests with scripts/test.sh, or start servers "
            "with python scripts/servers.py start and source .servers.env)")


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() not in ("", "0", "false", "no")
