"""Redis and Valkey backends: the lease strategy (default) and claim-only comparisons.

``RedisBackend(redis="redis://localhost:6379", prefix="cron:")`` and
``ValkeyBackend(valkey=..., ...)`` hold leases; ``comparison_backend("stream-id", url)``
(or ``from_url("redis://…?strategy=stream-id")``) builds a claim-only comparison.
Needs ``pip install "anarchon[redis]"`` (redis-py) or ``"anarchon[valkey]"`` (valkey-py).
"""

from __future__ import annotations

from .lease import RedisBackend, ValkeyBackend
from .strategies import (
    IdmpBackend,
    RedisClaimBackend,
    ScriptBackend,
    StreamIdBackend,
    comparison_backend,
)

__all__ = ["IdmpBackend", "RedisBackend", "RedisClaimBackend", "ScriptBackend",
           "StreamIdBackend", "ValkeyBackend", "comparison_backend"]
