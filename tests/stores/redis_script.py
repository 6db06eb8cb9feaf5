"""Redis 7 with the claim-only ``script`` strategy (a Lua check-then-add).

Same server as :mod:`tests.stores.redis` (``ANARCHON_REDIS_URL``); each namespace is a key
``prefix``. Claim-only: it runs the claim contract, not the lease suite.
"""

from __future__ import annotations

from . import StoreSpec
from .redis import BASE_URL, purge_keys, redis_unavailable, url_with_prefix


def _url(namespace: str) -> str:
    return url_with_prefix(BASE_URL, namespace) + "&strategy=script&lab=1"


STORE = StoreSpec(id="redis-script", make_url=_url, lease=False,
                  unavailable=lambda: redis_unavailable(BASE_URL, "ANARCHON_REDIS_URL"),
                  purge=lambda namespaces: purge_keys(BASE_URL, namespaces))
