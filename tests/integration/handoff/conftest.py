"""The hand-off tests' fixtures: real brokers (``tests.harness.dramatiq.fixtures``: Redis,
RabbitMQ) and a SQLite store of each test's own."""

from tests.harness.celery.fixtures import _plain_celery_project
from tests.harness.dramatiq.fixtures import broker_kind, db, namespace

__all__ = ["_plain_celery_project", "broker_kind", "db", "namespace"]
