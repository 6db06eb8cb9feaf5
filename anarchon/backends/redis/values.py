"""Shared values on Redis/Valkey: one hash per job, compare-and-set in ``swap.lua``."""

from __future__ import annotations

from importlib import resources

from ..capabilities import ValueStore
from .connection import RedisStore, text

_SWAP = resources.files(__package__ or "anarchon.backends.redis").joinpath(
    "swap.lua").read_text(encoding="utf-8")


class RedisValues(ValueStore):
    """``read_value`` / ``swap_value`` for a backend whose ``store`` is a RedisStore."""

    store: RedisStore

    def _values_key(self, name: str) -> str:
        # the job's hash tag: on a Cluster the values live beside the job's other keys
        return self.store.keys(name).values

    async def read_value(self, name: str, field: str) -> str | None:
        """See
        [`ValueStore.read_value()`][anarchon.backends.capabilities.ValueStore.read_value]."""
        raw = await self.store.command("HGET", self._values_key(name), field)
        return None if raw is None else text(raw)

    async def swap_value(self, name: str, field: str, expected: str | None,
                         value: str) -> bool:
        """See
        [`ValueStore.swap_value()`][anarchon.backends.capabilities.ValueStore.swap_value]
        (one EVAL)."""
        reply = await self.store.command(
            "EVAL", _SWAP, 1, self._values_key(name), field,
            "0" if expected is None else "1", expected or "", value)
        return int(reply) == 1


__all__ = ["RedisValues"]
