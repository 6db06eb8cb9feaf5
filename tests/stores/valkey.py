"""Valkey 8 (lease strategy): only from ``ANARCHON_VALKEY_URL`` (``scripts/servers.py``
starts a copy on a free port; there is no standard port to assume)."""

from __future__ import annotations

import os

from . import StoreSpec
from .redis import purge_keys, redis_unavailable, url_with_prefix

BASE_URL = os.environ.get("ANARCHON_VALKEY_URL") or ""


def _url(namespace: str) -> str:
    # the redis:// scheme with the valkey backend class: force it through valkey://
    return url_with_prefix(BASE_URL, namespace, scheme="valkey")


def _unavailable() -> str | None:
    if not BASE_URL:
        return "ANARCHON_VALKEY_URL is not set (start servers: python scripts/servers.py start)"
    return redis_unavailable(BASE_URL, "ANARCHON_VALKEY_URL")


STORE = StoreSpec(id="valkey", make_url=_url, lease=True, unavailable=_unavailable,
                  purge=lambda namespaces: purge_keys(BASE_URL, namespaces))
