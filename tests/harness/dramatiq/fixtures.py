"""Fixtures for the Dramatiq layer: real brokers (Redis, RabbitMQ) and a Redis store.

A missing server (or a missing ``dramatiq`` package) skips locally and fails in CI.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import anarchon
import anarchon_dramatiq as ad
from anarchon import AsyncScheduler, RunRecord, SqliteBackend
from tests.stores import in_ci, not_set
from tests.stores.redis import BASE_URL as REDIS_URL
from tests.stores.redis import STORE as REDIS_STORE
from tests.stores.redis import redis_unavailable

RABBITMQ_URL = os.environ.get("ANARCHON_RABBITMQ_URL") or ""


def _missing(reason: str) -> None:
    if in_ci():
        pytest.fail(f"CI needs it: {reason}", pytrace=False)
    pytest.skip(reason)


if importlib.util.find_spec("dramatiq") is None:
    if in_ci():
        raise RuntimeError('dramatiq is not installed (pip install "anarchon[dramatiq]")')
    collect_ignore_glob = ["test_*.py"]
else:
    from dramatiq import Broker
    from dramatiq.brokers.stub import StubBroker
    from dramatiq.middleware import CurrentMessage


def _pika() -> Any:
    import pika  # type: ignore[import-untyped]

    return pika


def rabbitmq_unavailable() -> str | None:
    """None when RabbitMQ at ``ANARCHON_RABBITMQ_URL`` accepts a connection."""
    if not RABBITMQ_URL:
        return not_set("ANARCHON_RABBITMQ_URL")
    try:
        pika = _pika()
    except ImportError:
        return 'pika is not installed (pip install "dramatiq[rabbitmq]")'
    try:
        params = pika.URLParameters(RABBITMQ_URL)
        params.socket_timeout = params.blocked_connection_timeout = 2
        pika.BlockingConnection(params).close()
    except Exception as exc:
        return f"RabbitMQ at ANARCHON_RABBITMQ_URL does not answer: {exc!r}"
    return None


@pytest.fixture
def namespace() -> str:
    return "adt_" + uuid.uuid4().hex[:10]


@pytest.fixture
def store(namespace: str) -> str:
    """The anarchon store (Redis, lease strategy) on this test's own prefix."""
    reason = REDIS_STORE.unavailable()
    if reason:
        _missing(f"redis store: {reason}")
    return REDIS_STORE.url_for(namespace)


@pytest.fixture(params=["redis", "rabbitmq"])
def broker_kind(request: pytest.FixtureRequest, namespace: str) -> Iterator[str]:
    """A real Dramatiq broker whose server answers; its queues are deleted afterwards."""
    kind: str = request.param
    reason = (redis_unavailable(REDIS_URL, "ANARCHON_REDIS_URL") if kind == "redis"
              else rabbitmq_unavailable())
    if reason:
        _missing(f"{kind} broker: {reason}")
    yield kind
    _cleanup(kind, namespace)


def _cleanup(kind: str, namespace: str) -> None:
    import redis

    client = redis.Redis.from_url(REDIS_URL)  # the store's keys (and the Redis broker's)
    keys = list(client.scan_iter(f"{namespace}*"))
    if keys:
        client.delete(*keys)
    client.close()
    if kind == "rabbitmq":
        pika = _pika()
        connection = pika.BlockingConnection(pika.URLParameters(RABBITMQ_URL))
        channel = connection.channel()
        for queue in (namespace, f"{namespace}.DQ", f"{namespace}.XQ", f"{namespace}.DQ.XQ"):
            channel.queue_delete(queue)
        connection.close()


@pytest.fixture
def broker() -> Iterator[StubBroker]:
    """Dramatiq's in-memory broker with ``CurrentMessage``, booted as a worker would be."""
    stub = StubBroker()
    stub.add_middleware(CurrentMessage())
    stub.emit_after("process_boot")
    yield stub
    stub.flush_all()
    stub.close()


@pytest.fixture
def db(tmp_path: Path) -> str:
    """A SQLite store file of this test's own."""
    return str(tmp_path / "jobs.db")


def history_of(db: str, name: str) -> list[RunRecord]:
    """Job ``name``'s history in the SQLite store ``db``."""
    reader = anarchon.Scheduler(SqliteBackend(database=db))
    try:
        return reader.history(name)
    finally:
        reader.close()


def run_scheduler(db: str, broker: Broker, seconds_until: Callable[[], bool],
                  timeout: float, **register: Any) -> AsyncScheduler:
    """Run a scheduler with ``broker``'s marked actors on ``db`` until ``seconds_until()``."""
    async def main() -> AsyncScheduler:
        scheduler = AsyncScheduler(SqliteBackend(database=db), lease=2, heartbeat=0.3,
                                   jitter=0.05)
        ad.register_actors(scheduler, broker, **register)
        await scheduler.start()
        deadline = time.monotonic() + timeout
        try:
            while not seconds_until():
                if time.monotonic() > deadline:
                    raise AssertionError("timed out waiting for the scheduler's messages")
                await asyncio.sleep(0.02)
        finally:
            await scheduler.stop()
        return scheduler

    return asyncio.run(main())
