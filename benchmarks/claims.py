"""Claim latency next to the store's floor, with N instances contending for each slot.

    python -m benchmarks.claims --backend sqlite:////tmp/bench.db --instances 3 --rounds 300

Each instance is its own process with its own connection. In every round all instances
wait on a barrier and then claim the same slot at once (one wins, the others lose), so
the numbers include contention. The floor is the cheapest round trip to the same store,
measured in the same run: SQLite an empty ``BEGIN IMMEDIATE; COMMIT``; Redis/Valkey one
``EVALSHA`` of a no-op script; PostgreSQL ``SELECT 1`` in autocommit.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import statistics
import time
import uuid
from multiprocessing.synchronize import Barrier
from typing import Any
from urllib.parse import urlsplit

from anarchon import from_url
from anarchon.backends.base import ClaimRequest, JobSpec


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def _floor_once(url: str, rounds: int) -> list[float]:
    scheme = urlsplit(url).scheme
    samples: list[float] = []
    if scheme == "sqlite":
        import sqlite3

        path = urlsplit(url).path[1:]
        lite = sqlite3.connect(path, isolation_level=None)
        for _ in range(rounds):
            start = time.perf_counter()
            lite.execute("BEGIN IMMEDIATE")
            lite.execute("COMMIT")
            samples.append(time.perf_counter() - start)
        lite.close()
    elif scheme in ("redis", "valkey"):
        import redis.asyncio as redis

        client = redis.Redis.from_url(url.replace("valkey://", "redis://").split("?")[0])
        noop = client.register_script("return 1")
        await noop()
        for _ in range(rounds):
            start = time.perf_counter()
            await noop()
            samples.append(time.perf_counter() - start)
        await client.aclose()
    elif scheme in ("postgres", "postgresql"):
        import psycopg

        dsn = url.split("?")[0]
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as connection:
            for _ in range(rounds):
                start = time.perf_counter()
                await connection.execute("SELECT 1")
                samples.append(time.perf_counter() - start)
    return samples


async def _claims(url: str, rounds: int, index: int, barrier: Barrier) -> list[float]:
    backend = from_url(url)
    await backend.open()
    await backend.register([JobSpec("bench", "every", "every 1s")])
    owner = f"bench-{index}"
    base = int(time.time() * 1000)
    samples = []
    for n in range(rounds):
        await asyncio.to_thread(barrier.wait)
        request = ClaimRequest(name="bench", slot=base + n, owner=owner, reason="scheduled",
                               lease_ms=30_000, max_late_ms=3_600_000, max_attempts=3,
                               overlap="allow")
        start = time.perf_counter()
        await backend.claim(request)
        samples.append(time.perf_counter() - start)
    await backend.close()
    return samples


def _instance(url: str, rounds: int, index: int, barrier: Barrier, out: Any) -> None:
    out.put(asyncio.run(_claims(url, rounds, index, barrier)))


def measure(url: str, instances: int, rounds: int) -> dict[str, Any]:
    """Claim latency (all instances' samples) and the floor, in milliseconds."""
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(instances)
    out = context.Queue()
    procs = [context.Process(target=_instance, args=(url, rounds, i, barrier, out))
             for i in range(instances)]
    for proc in procs:
        proc.start()
    claims = [sample for _ in procs for sample in out.get()]
    for proc in procs:
        proc.join()
    floor = asyncio.run(_floor_once(url, rounds))
    claim_median = statistics.median(claims) * 1000
    floor_median = statistics.median(floor) * 1000 if floor else float("nan")
    return {
        "backend": urlsplit(url).scheme, "instances": instances, "claims": len(claims),
        "claim_median_ms": round(claim_median, 3),
        "claim_p99_ms": round(percentile(claims, 0.99) * 1000, 3),
        "floor_median_ms": round(floor_median, 3),
        "floor_p99_ms": round(percentile(floor, 0.99) * 1000, 3) if floor else None,
        "ratio": round(claim_median / floor_median, 2) if floor else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", required=True, help="backend URL")
    parser.add_argument("--instances", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=300)
    args = parser.parse_args()
    url = args.backend
    if "sqlite" not in url:
        joiner = "&" if "?" in url else "?"
        key = "table" if url.startswith("postgres") else "prefix"
        url += f"{joiner}{key}=bench_{uuid.uuid4().hex[:8]}" + (":" if key == "prefix" else "")
    print(json.dumps(measure(url, args.instances, args.rounds)))


if __name__ == "__main__":
    main()
