"""The Dramatiq tests' fixtures (:mod:`tests.harness.dramatiq.fixtures`)."""

from tests.harness.dramatiq.fixtures import broker, broker_kind, db, namespace, store

__all__ = ["broker", "broker_kind", "db", "namespace", "store"]
