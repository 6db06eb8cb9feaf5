"""The Celery tests' broker keys are removed when the session ends."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.harness.celery.cluster import BROKER, delete_broker_keys


@pytest.fixture(scope="session", autouse=True)
def _remove_broker_keys() -> Iterator[None]:
    yield
    if BROKER:
        import redis

        try:
            delete_broker_keys()
        except redis.RedisError:
            pass  # the broker is gone already; nothing of ours is left on it


@pytest.fixture(autouse=True)
def _plain_celery_project(monkeypatch: pytest.MonkeyPatch) -> None:
    """The beats and workers these tests start are a plain Celery project: a session that
    also collected the Django tests (their conftest sets ``DJANGO_SETTINGS_MODULE``) must
    not hand the test project's settings (its LOGGING, its ANARCHON) to them."""
    monkeypatch.delenv("DJANGO_SETTINGS_MODULE", raising=False)
