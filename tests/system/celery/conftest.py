"""The Celery tests' fixtures (:mod:`tests.harness.celery.fixtures`)."""

from tests.harness.celery.fixtures import _plain_celery_project, _remove_broker_keys

__all__ = ["_plain_celery_project", "_remove_broker_keys"]
