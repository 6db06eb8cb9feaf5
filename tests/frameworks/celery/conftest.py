"""The Celery tests' broker keys are removed when the session ends."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.frameworks.celery.harness import BROKER, delete_broker_keys


@pytest.fixture(scope="session", autouse=True)
def _remove_broker_keys() -> Iterator[None]:
    yield
    if BROKER:
        import redis

        try:
            delete_broker_keys()
        except redis.RedisError:
            pass  # the broker is gone already; nothing of ours is left on it
