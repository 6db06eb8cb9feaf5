"""Remove what one namespace left in a store (keys, tables, queues, streams).

The namespace is the one :func:`tests.harness.rig.backend_url` (and, for the brokers,
:mod:`tests.stores`) put into the backend URL: the key prefix ``<namespace>:``, the table
``t_<namespace>`` and its ``_…`` siblings, the queues ``<namespace>.jobs`` and
``<namespace>.history.<job>``, the stream :func:`stream_for`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

#: the tables the PostgreSQL backend makes beside ``t_<namespace>`` (``floor``: the
#: benchmarks' claims section)
POSTGRES_SIBLINGS = ("attempts", "jobs", "meta", "triggers", "control", "changes", "offers",
                     "floor")


def stream_for(namespace: str) -> str:
    """The NATS stream of ``namespace``."""
    return namespace.upper().replace(".", "_")


async def cleanup(store: str, base: str | None, namespace: str, jobs: Sequence[str]) -> None:
    """:func:`remove`, best effort: a failure here never fails the caller."""
    with contextlib.suppress(Exception):
        await remove(store, base, namespace, jobs)


async def remove(store: str, base: str | None, namespace: str, jobs: Sequence[str]) -> None:
    """Remove ``namespace`` from ``store`` at ``base`` (``jobs``: the job names, for the
    RabbitMQ history queues); SQLite (a file per namespace) needs nothing."""
    if store in ("redis", "valkey"):
        assert base is not None
        await _delete_keys(base, namespace)
    elif store == "postgres":
        assert base is not None
        await _drop_tables(base, namespace)
    elif store == "rabbitmq":
        assert base is not None
        await _delete_queues(base, [f"{namespace}.jobs",
                                    *(f"{namespace}.history.{j}" for j in jobs)])
    elif store == "nats":
        assert base is not None
        await _delete_stream(base, stream_for(namespace))


def delete_keys(url: str, pattern: str) -> int:
    """Delete every key matching ``pattern`` on the Redis server at ``url`` (blocking, for
    code outside an event loop); returns how many there were."""
    import redis

    client = redis.Redis.from_url(url.split("?")[0])
    try:
        keys = list(client.scan_iter(match=pattern, count=1000))
        for i in range(0, len(keys), 500):
            client.delete(*keys[i:i + 500])
        return len(keys)
    finally:
        client.close()


async def _delete_keys(base: str, namespace: str) -> None:
    import redis.asyncio as redis

    client: Any = redis.Redis.from_url(base.split("?")[0])
    try:
        batch: list[Any] = []
        async for key in client.scan_iter(match=f"*{namespace}:*", count=1000):
            batch.append(key)
            if len(batch) >= 500:
                await client.delete(*batch)
                batch = []
        if batch:
            await client.delete(*batch)
    finally:
        await client.aclose()


async def _drop_tables(base: str, namespace: str) -> None:
    import psycopg
    from psycopg import sql

    table = f"t_{namespace}"
    names = [table] + [f"{table}_{s}" for s in POSTGRES_SIBLINGS]
    async with await psycopg.AsyncConnection.connect(base.split("?")[0],
                                                     autocommit=True) as conn:
        for name in names:
            await conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(sql.Identifier(name)))


async def _delete_queues(base: str, queues: Sequence[str]) -> None:
    """Delete ``queues``; one never declared is passed over."""
    import aio_pika

    connection = await aio_pika.connect(base.split("?")[0])
    try:
        for queue in queues:
            channel = await connection.channel()
            try:
                await channel.queue_delete(queue)
            except aio_pika.exceptions.AMQPError:
                pass  # never declared (the broker closed the channel)
            finally:
                if not channel.is_closed:
                    await channel.close()
    finally:
        await connection.close()


async def _delete_stream(base: str, stream: str) -> None:
    import nats
    import nats.js.errors

    client = await nats.connect(base.split("?")[0])
    try:
        with contextlib.suppress(nats.js.errors.NotFoundError):
            await client.jetstream().delete_stream(stream)
    finally:
        await client.close()


__all__ = ["cleanup", "delete_keys", "remove", "stream_for"]
