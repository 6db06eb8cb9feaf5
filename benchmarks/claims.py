"""Claim latency next to the store's floor, with N instances contending for each slot.

    python -m benchmarks.claims --backend sqlite:////tmp/bench.db --instances 3 --rounds 300

Each instance is its own process with its own connection. In every round all instances
wait on a barrier and then claim the same slot at once (one wins, the others lose), so
the numbers include contention. The floor is the cheapest round trip to the same store,
measured in the same run: SQLite an empty ``BEGIN IMMEDIATE; COMMIT``; Redis/Valkey one
``EVALSHA`` of a no-op script; PostgreSQL ``SELECT 1`` in autocommit; RabbitMQ one
persistent publish on a confirm channel, awaited; NATS one JetStream publish (with a
``Nats-Msg-Id``), awaited.

The floors of SQLite, Redis/Valkey and PostgreSQL write nothing, while a claim is a
write; so each of them also gets a *write floor*, the cheapest write of a claim's shape
in one round trip, measured in the same run: SQLite ``BEGIN IMMEDIATE; INSERT OR REPLACE``
of one row ``; COMMIT`` (WAL, ``synchronous=NORMAL``: the backend's settings); Redis/Valkey
one ``EVALSHA`` of a script that does one ``HSET``, called with the claim's 5 ``KEYS`` and
10 ``ARGV`` and answering a 3-item array as the claim does; PostgreSQL one ``INSERT … ON
CONFLICT (k) DO UPDATE`` of one row of a logged table, in autocommit (a temporary table
would not write WAL). The brokers' floors are already durable writes: their write floor
is the floor. The write-floor keys and tables live in the run's namespace and are removed
afterwards.
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
from urllib.parse import parse_qs, urlsplit

from anarchon import from_url
from anarchon.backends.base import ClaimRequest, JobSpec

from .common import percentile

STORE_OF_SCHEME = {"sqlite": "sqlite", "redis": "redis", "rediss": "redis", "valkey": "valkey",
                   "valkeys": "valkey", "postgres": "postgres", "postgresql": "postgres",
                   "amqp": "rabbitmq", "amqps": "rabbitmq", "nats": "nats",
                   "django": "django"}

FLOOR_TEXT = {
    "sqlite": "BEGIN IMMEDIATE; COMMIT",
    "redis": "EVALSHA no-op",
    "valkey": "EVALSHA no-op",
    "postgres": "SELECT 1",
    "rabbitmq": "confirmed publish",
    "nats": "JetStream publish",
    "django": "SELECT 1 (Django connection)",
}

WRITE_FLOOR_TEXT = {
    "sqlite": "BEGIN IMMEDIATE; INSERT OR REPLACE; COMMIT",
    "redis": "EVALSHA HSET (5 KEYS, 10 ARGV)",
    "valkey": "EVALSHA HSET (5 KEYS, 10 ARGV)",
    "postgres": "INSERT ... ON CONFLICT DO UPDATE",
    "rabbitmq": "= floor",
    "nats": "= floor",
    "django": "= floor",
}

#: one HSET, with a claim's KEYS/ARGV and a claim's reply shape ({outcome, attempt, now})
WRITE_FLOOR_SCRIPT = "redis.call('HSET', KEYS[1], ARGV[1], ARGV[2]) return {ARGV[3], 1, ARGV[1]}"


def _query(url: str, key: str, default: str) -> str:
    return parse_qs(urlsplit(url).query).get(key, [default])[0]


async def _floor_once(url: str, rounds: int) -> list[float]:
    store = STORE_OF_SCHEME[urlsplit(url).scheme]
    samples: list[float] = []
    if store == "sqlite":
        import sqlite3

        lite = sqlite3.connect(urlsplit(url).path[1:], isolation_level=None)
        lite.execute("PRAGMA synchronous=NORMAL")  # as the backend (its WAL mode persists)
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
    elif store == "django":
        samples = await asyncio.to_thread(_django_floor, url, rounds)
    return samples


def _django_floor(url: str, rounds: int) -> list[float]:
    """``SELECT 1`` through the alias's Django connection, ``rounds`` times (seconds)."""
    from django.db import connections

    alias = urlsplit(url).netloc
    samples = []
    with connections[alias].cursor() as cursor:
        cursor.execute("SELECT 1")
        for _ in range(rounds):
            start = time.perf_counter()
            cursor.execute("SELECT 1")
            cursor.fetchone()
            samples.append(time.perf_counter() - start)
    connections[alias].close()
    return samples


async def _write_floor_once(url: str, rounds: int) -> list[float]:
    """The write floor (see the module docstring); empty for the brokers."""
    store = STORE_OF_SCHEME[urlsplit(url).scheme]
    base = int(time.time() * 1000)
    if store == "sqlite":
        return await asyncio.to_thread(_sqlite_write_floor, url, rounds, base)
    if store in ("redis", "valkey"):
        return await _redis_write_floor(url, rounds, base)
    if store == "postgres":
        return await _postgres_write_floor(url, rounds, base)
    return []


def _sqlite_write_floor(url: str, rounds: int, base: int) -> list[float]:
    import sqlite3

    table = _query(url, "table", "anarchon") + "_floor"
    lite = sqlite3.connect(urlsplit(url).path[1:], isolation_level=None)
    samples: list[float] = []
    try:
        lite.execute("PRAGMA journal_mode=WAL")  # the backend's settings (_connect)
        lite.execute("PRAGMA synchronous=NORMAL")
        lite.execute(f'CREATE TABLE IF NOT EXISTS "{table}" (k INTEGER PRIMARY KEY, v TEXT)')
        for n in range(rounds + 1):
            start = time.perf_counter()
            lite.execute("BEGIN IMMEDIATE")
            lite.execute(f'INSERT OR REPLACE INTO "{table}" (k, v) VALUES (?, ?)',
                         (base + n, "running"))
            lite.execute("COMMIT")
            samples.append(time.perf_counter() - start)
    finally:
        if lite.in_transaction:
            lite.execute("ROLLBACK")
        lite.execute(f'DROP TABLE IF EXISTS "{table}"')
        lite.close()
    return samples[1:]


async def _redis_write_floor(url: str, rounds: int, base: int) -> list[float]:
    import redis.asyncio as redis

    prefix = _query(url, "prefix", "bench:")
    keys = [f"{{{prefix}floor}}:{part}" for part in ("runs", "active", "done", "att", "hist")]
    client: Any = redis.Redis.from_url(url.replace("valkey://", "redis://").split("?")[0])
    samples: list[float] = []
    try:
        write = client.register_script(WRITE_FLOOR_SCRIPT)
        owner = f"bench-0-{uuid.uuid4().hex[:6]}"
        for n in range(rounds + 1):
            # the values a claim sends: slot, owner, reason, lease, max_late, max_attempts,
            # overlap, catch_up, expected_attempt, first_seen
            args = [str(base + n), owner, "scheduled", "30000", "60000", "3", "allow", "0",
                    "0", "-1"]
            start = time.perf_counter()
            await write(keys=keys, args=args)
            samples.append(time.perf_counter() - start)
    finally:
        await client.delete(*keys)
        await client.aclose()
    return samples[1:]


async def _postgres_write_floor(url: str, rounds: int, base: int) -> list[float]:
    import psycopg
    from psycopg import sql

    table = sql.Identifier(_query(url, "table", "anarchon") + "_floor")
    upsert = sql.SQL("INSERT INTO {} (k, v) VALUES (%s, %s) "
                     "ON CONFLICT (k) DO UPDATE SET v = excluded.v").format(table)
    samples: list[float] = []
    async with await psycopg.AsyncConnection.connect(url.split("?")[0],
                                                     autocommit=True) as connection:
        await connection.execute(sql.SQL("CREATE TABLE IF NOT EXISTS {} "
                                         "(k bigint PRIMARY KEY, v text)").format(table))
        try:
            for n in range(rounds + 1):
                start = time.perf_counter()
                await connection.execute(upsert, (base + n, "running"))
                samples.append(time.perf_counter() - start)
        finally:
            await connection.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(table))
    return samples[1:]


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
    """Claim latency (all instances' samples) and the floors, in milliseconds."""
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
    write_floor = asyncio.run(_write_floor_once(url, rounds)) or floor
    claim_median = statistics.median(claims) * 1000
    floor_median = statistics.median(floor) * 1000 if floor else float("nan")
    write_median = statistics.median(write_floor) * 1000 if write_floor else float("nan")
    store = STORE_OF_SCHEME[urlsplit(url).scheme]
    # django://sqlite_<namespace> (tests.harness.django_stores) -> "django-sqlite"
    label = f"django-{urlsplit(url).netloc.split('_')[0]}" if store == "django" else store
    return {
        "backend": label, "instances": instances, "claims": len(claims),
        "claim_median_ms": round(claim_median, 3),
        "claim_p99_ms": round(percentile(claims, 0.99) * 1000, 3),
        "floor": FLOOR_TEXT[store],
        "floor_median_ms": round(floor_median, 3),
        "floor_p99_ms": round(percentile(floor, 0.99) * 1000, 3) if floor else None,
        "ratio": round(claim_median / floor_median, 2) if floor else None,
        "write_floor": WRITE_FLOOR_TEXT[store],
        "write_floor_median_ms": round(write_median, 3),
        "write_floor_p99_ms": (round(percentile(write_floor, 0.99) * 1000, 3)
                               if write_floor else None),
        "write_ratio": round(claim_median / write_median, 2) if write_floor else None,
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
