"""RabbitMQ (claim-only): ``ANARCHON_RABBITMQ_URL`` (from ``scripts/servers.py``).

Each namespace becomes its own queue ``prefix`` (``<namespace>.``). ``slot_ttl`` is 90 s so
jobs with the default ``jitter`` (2 s) and ``max_late`` (60 s) can be added.
"""

from __future__ import annotations

import importlib.util
import os
import socket
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from tests.harness.cleanup import remove

from . import StoreSpec, not_set, remember

BASE_URL = os.environ.get("ANARCHON_RABBITMQ_URL") or ""
SLOT_TTL = "90s"


def url_for(namespace: str, **options: str) -> str:
    """The backend URL with ``prefix=<namespace>.`` (plus ``options``) in its query."""
    remember("rabbitmq", namespace)
    parts = urlsplit(BASE_URL)
    query = dict(parse_qsl(parts.query))
    query.update(prefix=f"{namespace}.", slot_ttl=SLOT_TTL, **options)
    return urlunsplit((parts.scheme, parts.netloc, parts.path or "/", urlencode(query), ""))


def _unavailable() -> str | None:
    if not BASE_URL:
        return not_set("ANARCHON_RABBITMQ_URL")
    if importlib.util.find_spec("aio_pika") is None:
        return 'aio-pika is not installed (pip install "anarchon[rabbitmq]")'
    parts = urlsplit(BASE_URL)
    host, port = parts.hostname, parts.port
    if host is None or port is None:
        return "ANARCHON_RABBITMQ_URL names no host and port"
    try:
        with socket.create_connection((host, port), timeout=2.0) as sock:
            sock.sendall(b"AMQP\x00\x00\x09\x01")
            reply = sock.recv(64)
    except OSError as exc:
        return f"no AMQP server at {host}:{port} (ANARCHON_RABBITMQ_URL): {exc}"
    if len(reply) < 11 or reply[0] != 1 or reply[7:11] != b"\x00\x0a\x00\x0a":
        return f"server at {host}:{port} (ANARCHON_RABBITMQ_URL) does not speak AMQP 0-9-1"
    return None


def _purge(namespaces: set[str]) -> None:
    """Delete the namespaces' job lists and history queues (gate queues expire by
    themselves after ``slot_ttl``)."""
    import asyncio

    import aio_pika

    from anarchon.backends.rabbitmq import RabbitMQBackend

    async def delete() -> None:
        connection = await aio_pika.connect(BASE_URL)
        try:
            channel = await connection.channel()
            for namespace in namespaces:
                backend = RabbitMQBackend.from_url(url_for(namespace))
                await backend.open()
                try:
                    jobs = await backend.known_jobs()
                finally:
                    await backend.close()
                for name in [*(backend.history_queue(job.name) for job in jobs),
                             backend.jobs_queue]:
                    await channel.queue_delete(name)
        finally:
            await connection.close()

    asyncio.run(delete())


STORE = StoreSpec(id="rabbitmq", make_url=url_for, lease=False, unavailable=_unavailable,
                  purge=_purge)


async def cleanup(namespace: str, jobs: list[str]) -> None:
    """Delete the jobs and history queues a test made (gates expire by themselves)."""
    await remove("rabbitmq", BASE_URL, namespace, jobs)
