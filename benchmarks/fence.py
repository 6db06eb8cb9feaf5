"""The cost of the version fence in a claim, on one connection:

    python -m benchmarks.fence --backend redis://127.0.0.1:6379/0 --rounds 2000

Every round makes, in turn, an ``EVALSHA`` of a no-op script (the floor), an
``EVALSHA`` of the claim script with the fence's two lines cut out (the claim as it was
before the fence, same keys and arguments), a claim of a job with no control record
(``version=0``), a claim of a job whose record is at version 1 planned from it
(``version=1``: the fence reads the record and lets it through) and a claim planned
from version 0 of that job (refused as ``stale``, nothing written). The kinds are
interleaved so that a busy machine slows them alike. Round trips are counted
on the client (``benchmarks.common.count_redis_commands``): the fence must add none.
Prints one JSON object (medians and p99 in ms, round trips per claim).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

from anarchon import from_url
from anarchon.backends.base import ClaimRequest, JobSpec
from anarchon.backends.control import ControlChange
from anarchon.backends.redis.connection import _load_script

from .common import count_redis_commands, percentile

#: the version fence in claim_lib.lua, cut out for the claim as it was before it
FENCE = ("  local stored = tonumber(redis.call('HGET', control, 'v') or '0')\n"
         "  if stored > c.version then return 'stale', 0, stored end\n")


def _request(name: str, slot: int, version: int) -> ClaimRequest:
    return ClaimRequest(name=name, slot=slot, owner="bench", reason="scheduled",
                        lease_ms=30_000, max_late_ms=3_600_000, max_attempts=3,
                        overlap="allow", version=version)


async def _measure(url: str, rounds: int) -> dict[str, Any]:
    backend: Any = from_url(url)
    await backend.open()
    store = backend.store
    try:
        await backend.register([JobSpec(n, "every", "every 1s")
                                for n in ("free", "ctl", "old")])
        assert await backend.change_control(ControlChange("ctl", 0, "{}", "{}")) == 1
        noop = store._client.register_script("return 1")
        source = _load_script("claim")
        assert FENCE in source, "the fence in claim_lib.lua changed: update FENCE"
        unfenced = store._client.register_script(source.replace(FENCE, ""))

        async def without_fence(n: int) -> Any:
            request = _request("old", base + n, 0)
            return await unfenced(keys=backend._claim_keys("old"),
                                  args=await backend._claim_args(request, -1))

        trips: Counter[str] = Counter()
        count_redis_commands(store._client, trips)
        base = int(time.time() * 1000)
        kinds: dict[str, Callable[[int], Awaitable[Any]]] = {
            "floor_evalsha_noop": lambda n: noop(keys=[], args=[]),
            "claim_without_fence": without_fence,
            "claim_no_record": lambda n: backend.claim(_request("free", base + n, 0)),
            "claim_fence_passed": lambda n: backend.claim(_request("ctl", base + n, 1)),
            "claim_stale": lambda n: backend.claim(_request("ctl", base - n - 1, 0)),
        }
        samples: dict[str, list[float]] = {kind: [] for kind in kinds}
        counted: dict[str, int] = dict.fromkeys(kinds, 0)
        for n in range(rounds + 1):  # round 0 warms the scripts up
            for kind, call in kinds.items():
                before = trips["round_trips"]
                start = time.perf_counter()
                await call(n)
                took = time.perf_counter() - start
                if n:
                    samples[kind].append(took)
                    counted[kind] += trips["round_trips"] - before
        return {
            "backend": backend.name, "rounds": rounds,
            **{kind: {"p50_ms": round(statistics.median(s) * 1000, 3),
                      "p99_ms": round(percentile(s, 0.99) * 1000, 3),
                      "round_trips_per_call": counted[kind] / rounds}
               for kind, s in samples.items()},
        }
    finally:
        await backend.purge()
        await backend.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--backend", required=True, help="a Redis or Valkey URL")
    parser.add_argument("--rounds", type=int, default=2000)
    args = parser.parse_args()
    url = args.backend
    if "prefix=" not in url:
        url += ("&" if "?" in url else "?") + f"prefix=bench_{uuid.uuid4().hex[:8]}:"
    print(json.dumps(asyncio.run(_measure(url, args.rounds))))


if __name__ == "__main__":
    main()
