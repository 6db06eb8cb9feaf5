"""Redis and Valkey backends: the lease strategy (default) and claim-only comparisons.

``RedisBackend(redis="redis://localhost:6379", strategy="lease", prefix="cron:")`` and
``ValkeyBackend(valkey=..., ...)``. Needs ``pip install "anarchon[redis]"`` (redis-py) or
``"anarchon[valkey]"`` (valkey-py).
"""

from __future__ import annotations

from .lease import RedisBackend, ValkeyBackend
from .strategies import IdmpBackend, RedisClaimBackend, ScriptBackend, StreamIdBackend

__all__ = ["IdmpBackend", "RedisBackend", "RedisClaimBackend", "ScriptBackend",
           "StreamIdBackend", "ValkeyBackend"]
