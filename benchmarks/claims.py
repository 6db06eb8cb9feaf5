"""Claim latency next to the store's floor, with N instances contending for each slot.

    python -m benchmarks.claims --backend sqlite:////tmp/bench.db --instances 3 --rounds 300

Each instance is its own process with its own connection. In every round all instances
wait on a barrier and then claim the same slot at once (one wins, the others lose), so
the numbers include contention. The floor is the cheapest round trip to the same store,
measured in the same run: SQLite an empty ``BEGIN IMMEDIATE; COMMIT``; Redis/Valkey one
``EVALSHA`` of a no-op script; PostgreSQL ``SELECT 1`` in autocommit; RabbitMQ one
persistent publish on a confirm channel, awaited; NATS one JetStream publish (with a
``Nats-Msg-Id``), awaited.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import queue
import statistics
import time
import uuid
from multiprocessing.synchronize import Barrier
from typing import Any
from urllib.parse import urlsplit

from anarchon import from_url
from anarchon.backends.base import ClaimRequest, JobSpec

from .common import percentile

STORE_OF_SCHEME = {"sqlite": "sqlite", "redis": "redis", "rediss": "redis", "valkey": "valkey",
                   "valkeys": "valkey", "postgres": "postgres", "postgresql": "postgres",
                   "amqp": "rabbitmq", "amqps": "rabbitmq", "nats": "nats"}

FLOOR_TEXT = {
    "sqlite": "BEGIN IMMEDIATE; COMMIT",
    "redis": "EVALSHA no-op",
    "valkey": "EVALSHA no-op",
    "postgres": "SELECT 1",
    "rabbitmq": "confirmed publish",
    "nats": "JetStream publish",
}


async def _floor_once(url: str, rounds: int) -> list[float]:
    store = STORE_OF_SCHEME[urlsplit(url).scheme]
    samples: list[float] = []
    if store == "sqlite":
        import sqlite3

        lite = sqlite3.connect(urlsplit(url).path[1:], isolation_level=None)
        for _ in range(rounds):
            start = time.perf_counter()
            lite.execute("BEGIN IMMEDIATE")
            lite.execute("COMMIT")
            samples.append(time.perf_counter() - start)
        lite.close()
    elif store in ("redis", "valkey"):
        import redis.asyncio as redis

        client: Any = redis.Redis.from_url(
            url.replace("valkey://", "redis://").split("?")[0])
        noop = client.register_script("return 1")
        await noop()
        for _ in range(rounds):
            start = time.perf_counter()
            await noop()
            samples.append(time.perf_counter() - start)
        await client.aclose()
    elif store == "postgres":
        import psycopg

        async with await psycopg.AsyncConnection.connect(url.split("?")[0],
                                                         autocommit=True) as connection:
            await connection.execute("SELECT 1")
            for _ in range(rounds):
                start = time.perf_counter()
                await connection.execute("SELECT 1")
                samples.append(time.perf_counter() - start)
    elif store == "rabbitmq":
        samples = await _rabbitmq_floor(url.split("?")[0], rounds)
    elif store == "nats":
        samples = await _nats_floor(url.split("?")[0], rounds)
    return samples


async def _rabbitmq_floor(url: str, rounds: int) -> list[float]:
    import aio_pika

    connection = await aio_pika.connect(url)
    samples: list[float] = []
    try:
        channel = await connection.channel(publisher_confirms=True, on_return_raises=True)
        name = f"bench-floor-{uuid.uuid4().hex[:8]}"
        await channel.declare_queue(name, durable=True, arguments={
            "x-queue-type": "classic", "x-max-length": 1, "x-expires": 60_000})
        for _ in range(rounds + 1):
            message = aio_pika.Message(b"x", delivery_mode=aio_pika.DeliveryMode.PERSISTENT)
            start = time.perf_counter()
            await channel.default_exchange.publish(message, routing_key=name, mandatory=True)
            samples.append(time.perf_counter() - start)
        await channel.queue_delete(name)
        await channel.close()
    finally:
        await connection.close()
    return samples[1:]


async def _nats_floor(url: str, rounds: int) -> list[float]:
    import nats

    client = await nats.connect(url)
    samples: list[float] = []
    stream = f"BENCH_FLOOR_{uuid.uuid4().hex[:8].upper()}"
    try:
        js = client.jetstream()
        await js.add_stream(name=stream, subjects=[f"{stream.lower()}.x"])
        for _ in range(rounds + 1):
            headers = {"Nats-Msg-Id": uuid.uuid4().hex}
            start = time.perf_counter()
            await js.publish(f"{stream.lower()}.x", b"x", stream=stream, headers=headers)
            samples.append(time.perf_counter() - start)
        await js.delete_stream(stream)
    finally:
        await client.close()
    return samples[1:]


async def _claims(url: str, rounds: int, index: int, barrier: Barrier,
                  base: int) -> list[float]:
    backend = from_url(url)
    await backend.open()
    await backend.register([JobSpec("bench", "every", "every 1s")])
    owner = f"bench-{index}-{uuid.uuid4().hex[:6]}"
    samples = []
    for n in range(rounds):
        await asyncio.to_thread(barrier.wait)
        request = ClaimRequest(name="bench", slot=base + n, owner=owner, reason="scheduled",
                               lease_ms=30_000, max_late_ms=60_000, max_attempts=3,
                               overlap="allow")
        start = time.perf_counter()
        await backend.claim(request)
        samples.append(time.perf_counter() - start)
    await backend.close()
    return samples


def _instance(url: str, rounds: int, index: int, barrier: Barrier, base: int,
              out: Any) -> None:
    out.put(asyncio.run(_claims(url, rounds, index, barrier, base)))


def measure(url: str, instances: int, rounds: int) -> dict[str, Any]:
    """Claim latency (all instances' samples) and the floor, in milliseconds."""
    # fork is quicker to start than spawn; the parent holds no loop or threads here
    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    context: Any = multiprocessing.get_context(method)
    barrier = context.Barrier(instances)
    out = context.Queue()
    base = int(time.time() * 1000)  # the same slots for every instance: they contend
    procs = [context.Process(target=_instance, args=(url, rounds, i, barrier, base, out))
             for i in range(instances)]
    for proc in procs:
        proc.start()
    claims: list[float] = []
    received = 0
    while received < instances:
        try:
            claims.extend(out.get(timeout=1.0))
            received += 1
        except queue.Empty:
            failed = [p.exitcode for p in procs if p.exitcode not in (None, 0)]
            if failed:
                for proc in procs:
                    proc.kill()
                raise RuntimeError(f"claim instance(s) on {url} failed: exit {failed}") from None
    for proc in procs:
        proc.join()
    floor = asyncio.run(_floor_once(url, rounds))
    claim_median = statistics.median(claims) * 1000
    floor_median = statistics.median(floor) * 1000 if floor else float("nan")
    store = STORE_OF_SCHEME[urlsplit(url).scheme]
    return {
        "backend": store, "instances": instances, "claims": len(claims),
        "claim_median_ms": round(claim_median, 3),
        "claim_p99_ms": round(percentile(claims, 0.99) * 1000, 3),
        "floor": FLOOR_TEXT[store],
        "floor_median_ms": round(floor_median, 3),
        "floor_p99_ms": round(percentile(floor, 0.99) * 1000, 3) if floor else None,
        "ratio": round(claim_median / floor_median, 2) if floor else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--backend", required=True, help="backend URL")
    parser.add_argument("--instances", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=300)
    args = parser.parse_args()
    url = args.backend
    if not any(k in url for k in ("sqlite", "prefix=", "table=")):
        joiner = "&" if "?" in url else "?"
        key = "table" if url.startswith("postgres") else "prefix"
        url += f"{joiner}{key}=bench_{uuid.uuid4().hex[:8]}" + (":" if key == "prefix" else "")
    print(json.dumps(measure(url, args.instances, args.rounds)))


if __name__ == "__main__":
    main()
