"""Redis and Valkey backends: the lease strategy (default); claim-only comparisons in the lab.

``RedisBackend(redis="redis://localhost:6379", prefix="cron:")`` and
``ValkeyBackend(valkey=..., ...)`` hold leases; ``comparison_backend("stream-id", url)``
(or ``from_url("redis://…?strategy=stream-id&lab=1")``: lab code, refused by ``from_url``
without ``lab=1``) builds a claim-only comparison from the lab (``anarchon-lab``, in the
repository's ``lab/``; ``ImportError`` naming it when it is not installed).
Needs ``pip install "anarchon[redis]"`` (redis-py) or ``"anarchon[valkey]"`` (valkey-py).
"""

from __future__ import annotations

from typing import Any

from .comparisons import comparison_backend, strategy_class
from .lease import RedisBackend, ValkeyBackend

#: the lab's classes, importable from here while the lab is installed (former path)
_LAB_CLASSES = frozenset({"IdmpBackend", "RedisClaimBackend", "ScriptBackend",
                          "StreamIdBackend"})


def __getattr__(name: str) -> Any:
    if name in _LAB_CLASSES:
        return strategy_class(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["RedisBackend", "ValkeyBackend", "comparison_backend"]
