"""A 3-master Redis Cluster (lease strategy): ``ANARCHON_REDIS_CLUSTER_URL``, started by
``scripts/servers.py start --cluster``. The same suites run on it as on one Redis."""

from __future__ import annotations

import os

from . import StoreSpec
from .redis import purge_keys, redis_unavailable, url_with_prefix

BASE_URL = os.environ.get("ANARCHON_REDIS_CLUSTER_URL") or ""


def _unavailable() -> str | None:
    if not BASE_URL:
        return "ANARCHON_REDIS_CLUSTER_URL is not set (python scripts/servers.py start --cluster)"
    return redis_unavailable(BASE_URL, "ANARCHON_REDIS_CLUSTER_URL")


STORE = StoreSpec(id="redis-cluster", make_url=lambda ns: url_with_prefix(BASE_URL, ns),
                  lease=True, unavailable=_unavailable,
                  purge=lambda namespaces: purge_keys(BASE_URL, namespaces, cluster=True))
