"""Remove what a benchmark left in a store namespace (keys, tables, queues, streams)."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any


async def cleanup(store: str, base: str | None, namespace: str, jobs: Sequence[str]) -> None:
    """Best effort: a failure here never fails a benchmark."""
    with contextlib.suppress(Exception):
        await _cleanup(store, base, namespace, jobs)


async def _cleanup(store: str, base: str | None, namespace: str, jobs: Sequence[str]) -> None:
    if store in ("redis", "valkey"):
        import redis.asyncio as redis

        assert base is not None
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
    elif store == "postgres":
        import psycopg
        from psycopg import sql

        assert base is not None
        table = f"t_{namespace}"
        parts = ("attempts", "jobs", "meta", "triggers", "control", "changes", "offers",
                 "floor")  # floor: claims.py
        names = [table] + [f"{table}_{s}" for s in parts]
        async with await psycopg.AsyncConnection.connect(base.split("?")[0],
                                                         autocommit=True) as conn:
            for name in names:
                await conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(sql.Identifier(name)))
    elif store == "rabbitmq":
        import aio_pika

        assert base is not None
        connection = await aio_pika.connect(base.split("?")[0])
        try:
            for queue in [f"{namespace}.jobs", *(f"{namespace}.history.{j}" for j in jobs)]:
                channel = await connection.channel()
                with contextlib.suppress(Exception):
                    await channel.queue_delete(queue)
                if not channel.is_closed:
                    await channel.close()
        finally:
            await connection.close()
    elif store == "nats":
        import nats

        assert base is not None
        nc = await nats.connect(base.split("?")[0])
        try:
            with contextlib.suppress(Exception):
                await nc.jetstream().delete_stream(namespace.upper())
        finally:
            await nc.close()
