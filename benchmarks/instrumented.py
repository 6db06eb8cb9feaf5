"""Backends whose store calls are counted (the calls still go to the real store).

Every backend counts calls to its store methods (and so do the clones it makes for the
lease keeper's connection); Redis/Valkey backends are also given a
client of our own whose round trips (commands, pipeline executions) are counted.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlsplit, urlunsplit

from anarchon import from_url
from anarchon.backends.base import Backend

from .common import count_redis_commands, count_with_clones


@dataclass
class Counted:
    """A backend, its call counts and (Redis/Valkey) its client's round-trip counts."""

    backend: Backend
    calls: Counter[str] = field(default_factory=Counter)
    commands: Counter[str] = field(default_factory=Counter)
    client: Any = None

    def snapshot(self) -> dict[str, int]:
        """Current counts: ``call:<method>`` and ``round_trips``/``cmd:<NAME>``."""
        out = {f"call:{k}": v for k, v in self.calls.items()}
        out.update(self.commands)
        return out

    async def close(self) -> None:
        """Close the client we made (the backend never closes a client it was given)."""
        if self.client is not None:
            await self.client.aclose()
            self.client = None


#: redis-py 8's default asyncio pool opens at most 100 connections and then *raises*
#: ``MaxConnectionsError`` instead of waiting; the engine starts one claim per due job at
#: once, so a burst of >100 claims in flight (1,000 jobs on one slot, a loaded loop)
#: fails claims. The benchmarks give their client a blocking pool of the same size.
POOL_SIZE = 100


def counted_backend(store: str, url: str, blocking_pool: bool = True) -> Counted:
    """Build the backend for ``url`` with counting attached (Redis/Valkey: on a client of
    our own, with a blocking pool unless ``blocking_pool`` is False)."""
    if store in ("redis", "valkey"):
        parts = urlsplit(url)
        query = dict(parse_qsl(parts.query))
        plain = urlunsplit(("redis", parts.netloc, parts.path, "", ""))
        if store == "redis":
            import redis.asyncio as redis_driver

            from anarchon.backends.redis import RedisBackend

            client: Any = redis_driver.Redis(connection_pool=_pool(
                redis_driver, plain, blocking_pool))
            backend: Backend = RedisBackend(client, prefix=query.get("prefix", "cron:"))
        else:
            import valkey.asyncio as valkey_driver

            from anarchon.backends.redis import ValkeyBackend

            client = valkey_driver.Valkey(connection_pool=_pool(
                valkey_driver, plain, blocking_pool))
            backend = ValkeyBackend(client, prefix=query.get("prefix", "cron:"))
        counted = Counted(backend, client=client)
        count_redis_commands(client, counted.commands)
    else:
        counted = Counted(from_url(url))
    count_with_clones(counted.backend, counted.calls)  # the lease keeper's connection too
    return counted


def _pool(driver: Any, url: str, blocking: bool) -> Any:
    cls = driver.BlockingConnectionPool if blocking else driver.ConnectionPool
    return cls.from_url(url, max_connections=POOL_SIZE)


def delta(after: dict[str, int], before: dict[str, int]) -> dict[str, int]:
    """``after - before`` per key, without zeros."""
    keys = set(after) | set(before)
    return {k: after.get(k, 0) - before.get(k, 0) for k in sorted(keys)
            if after.get(k, 0) != before.get(k, 0)}


async def commandstats(url: str) -> dict[str, int] | None:
    """Server-wide ``INFO commandstats`` call counts of a Redis/Valkey server (every
    client of the server counts, so on a shared server this is an upper bound)."""
    import redis.asyncio as redis_driver

    parts = urlsplit(url)
    client: Any = redis_driver.Redis.from_url(urlunsplit(("redis", parts.netloc, parts.path,
                                                          "", "")))
    try:
        info = await client.info("commandstats")
    except Exception:
        return None
    finally:
        await client.aclose()
    return {name.removeprefix("cmdstat_"): int(v["calls"]) for name, v in info.items()}


def commandstats_total(before: dict[str, int] | None, after: dict[str, int] | None,
                       ignore: tuple[str, ...] = ("info",)) -> int | None:
    """Total calls between two ``commandstats`` snapshots, minus our own INFO calls."""
    if before is None or after is None:
        return None
    return sum(after[k] - before.get(k, 0) for k in after if k not in ignore)
