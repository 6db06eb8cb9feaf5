"""redbeat's side of the migration tests: its app on the test Redis and its keys."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from celery import Celery

from tests.harness.cleanup import delete_keys
from tests.stores.redis import BASE_URL as REDIS_URL


def redbeat_app(prefix: str) -> Celery:
    """A Celery app whose redbeat keeps its entries under ``prefix`` on the test Redis."""
    app = Celery("redbeat-side", broker=REDIS_URL, set_as_current=False)
    app.conf.update(redbeat_redis_url=REDIS_URL, redbeat_key_prefix=prefix, timezone="UTC")
    return app


@contextmanager
def redbeat_keys(tag: str) -> Iterator[str]:
    """A fresh redbeat key prefix (``tag-<hex>:``); its keys are deleted on the way out."""
    made = f"{tag}-{uuid.uuid4().hex[:8]}:"
    yield made
    delete_keys(REDIS_URL, made + "*")
