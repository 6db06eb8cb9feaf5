"""The key format a Redis/Valkey namespace records: the field ``""`` of ``<prefix>jobs``
(written by the first registration, checked by every one)."""

from __future__ import annotations

from ..capabilities import FormatStore
from ..formats import StoredFormat
from .connection import KEY_FORMAT, RedisStore, text


class RedisFormat(FormatStore):
    """``stored_format`` for [`RedisBackend`][anarchon.backends.redis.RedisBackend]."""

    store: RedisStore

    async def stored_format(self) -> StoredFormat:
        store = self.store
        raw = await store.command("HGET", store.jobs_key, "")
        return StoredFormat(
            f"hash {store.jobs_key} at {store.where}", None if raw is None else text(raw),
            KEY_FORMAT, True, "let the runs finish, then purge the prefix (`anarchon "
            "purge`) or use a new prefix")


__all__ = ["RedisFormat"]
