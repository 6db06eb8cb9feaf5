"""The ``"django"`` backend as a test store (conformance suites only): one migrated
alias per namespace, made by :mod:`benchmarks.django_stores`; importing the store
configures Django in the test process, so only the ``django_*`` store modules import
this, lazily. The schemas and databases are dropped when the test process exits."""

from __future__ import annotations

import atexit

from benchmarks.django_stores import (
    MARIADB_URL,
    POSTGRES_URL,
    admin,
    drop_all,
    server_config,
    unavailable,
)
from benchmarks.django_stores import prepare as _prepare

__all__ = ["MARIADB_URL", "POSTGRES_URL", "admin", "prepare", "server_config", "unavailable"]

atexit.register(drop_all)


def prepare(kind: str, namespace: str) -> str:
    """A migrated store for ``namespace`` on ``kind``; its ``django://ALIAS`` URL."""
    return _prepare(kind, namespace)
