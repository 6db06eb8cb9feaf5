"""Skip records on Redis/Valkey (the rules: ``anarchon.backends.skips``): ``skip.lua``."""

from __future__ import annotations

import asyncio
import json
from collections import defaultdict
from collections.abc import Sequence

from ..batches import check_skips
from ..capabilities import SkipStore
from ..skips import Skip
from .connection import RedisStore


class RedisSkips(SkipStore):
    """``record_skips`` for a backend whose ``store`` is a RedisStore."""

    store: RedisStore

    async def record_skips(self, skips: Sequence[Skip]) -> None:
        """One script call writing every skip record (all checked first); on a Cluster,
        one call per job (sent concurrently)."""
        checked = check_skips(skips)
        groups: dict[str, list[Skip]] = defaultdict(list)
        for skip in checked:
            groups[skip.name if self.store.cluster else ""].append(skip)
        await asyncio.gather(*(self._record_skips(group) for group in groups.values()))

    async def _record_skips(self, skips: Sequence[Skip]) -> None:
        keys: list[str] = []
        args: list[str] = []
        for skip in skips:
            k = self.store.keys(skip.name)
            keys += [k.runs, k.att, k.skips]
            ttl = -1 if skip.history_ttl_ms is None else skip.history_ttl_ms
            args += [str(skip.slot), skip.owner, skip.reason, str(skip.history_size),
                     str(ttl)]
        await self.store.script("skip", keys, [len(skips), json.dumps(args,
                                                                      ensure_ascii=False)])
