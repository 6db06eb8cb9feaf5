"""RabbitMQBackend against a real broker: gate queues, confirms, returns, lost confirms.

The broker comes from ``tests/stores/rabbitmq.py`` (``ANARCHON_RABBITMQ_URL``); a missing
broker skips locally and fails in CI. Construction tests need no broker.
"""

from __future__ import annotations

import asyncio
import sys
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from anarchon import AsyncScheduler, Scheduler
from anarchon.backends import from_url
from anarchon.backends.base import Finish, JobSpec, LeaseBackend
from anarchon.backends.rabbitmq import RabbitMQBackend
from anarchon.errors import IncompatibleStoreError, StoreError
from tests.conftest import _require
from tests.stores import rabbitmq as store
from tests.support import EventLog, now_ms, run
from tests.support import claim_only_request as request

aio_pika = pytest.importorskip("aio_pika")


@pytest.fixture
def namespace() -> Iterator[str]:
    _require(store.STORE)
    name = "rq_" + uuid.uuid4().hex[:10]
    yield name
    run(store.cleanup(name, ["job", "tick"]))


def backend_for(namespace: str, **options: Any) -> RabbitMQBackend:
    backend = from_url(store.url_for(namespace), **options)
    assert isinstance(backend, RabbitMQBackend)
    return backend


async def passive(queue: str) -> int | None:
    """The ready message count of ``queue``, or None if it does not exist."""
    connection = await aio_pika.connect(store.BASE_URL)
    try:
        channel = await connection.channel()
        try:
            declared = await channel.declare_queue(queue, passive=True)
        except aio_pika.exceptions.ChannelNotFoundEntity:
            return None
        count: int = declared.declaration_result.message_count
        return count
    finally:
        await connection.close()


# -- construction (no broker needed) -------------------------------------------------------

def test_construction_does_no_io_and_parses_urls() -> None:
    backend = RabbitMQBackend.from_url(
        "amqp://user:secret@127.0.0.1:1/vh?prefix=app.&slot_ttl=2m&heartbeat=10")
    assert (backend.prefix, backend.slot_ttl, backend.name) == ("app.", 120.0, "rabbitmq")
    assert "secret" not in repr(backend)
    assert backend.gate_queue("job", 5) == "app.gate.job.5"
    assert not isinstance(backend, LeaseBackend) and "history_ttl" in backend.refused_options()


def test_bad_options_are_refused() -> None:
    with pytest.raises(ValueError, match="prefix"):
        RabbitMQBackend(prefix="bad prefix")
    with pytest.raises(ValueError, match="reserved"):
        RabbitMQBackend(prefix="amq.x.")
    with pytest.raises(ValueError, match="amqp://"):
        RabbitMQBackend("redis://localhost")
    with pytest.raises(TypeError, match="aio-pika connection"):
        RabbitMQBackend(42)
    with pytest.raises(ValueError, match="slot_ttl"):
        RabbitMQBackend(slot_ttl="0s")


def test_missing_driver_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "aio_pika", None)
    with pytest.raises(ImportError, match=r'pip install "anarchon\[rabbitmq\]"'):
        RabbitMQBackend()


def test_jobs_are_checked_when_added() -> None:
    scheduler = Scheduler(RabbitMQBackend(slot_ttl="30s"))
    with pytest.raises(ValueError, match=r"'a\.b'.*rabbitmq"):
        scheduler.every("a.b", "1s", lambda ctx: None)
    with pytest.raises(ValueError, match="slot_ttl"):
        scheduler.every("tick", "1s", lambda ctx: None, jitter=1, max_late=29)
    long_prefix = Scheduler(RabbitMQBackend(prefix="p" * 60 + "."))
    with pytest.raises(ValueError, match="too long"):
        long_prefix.every("x" * 200, "1s", lambda ctx: None)
    scheduler.every("ok-job_1", "1s", lambda ctx: None, jitter=1, max_late=28)
    with pytest.raises(TypeError, match=r"history_ttl.*rabbitmq"):
        scheduler.every("kept", "1s", lambda ctx: None, history_ttl="1h")


# -- against the broker ---------------------------------------------------------------------

def test_gate_is_a_classic_one_message_queue_that_expires(namespace: str) -> None:
    async def scenario() -> None:
        backend = backend_for(namespace, slot_ttl="1s")
        await backend.open()
        slot = now_ms()
        assert (await backend.claim(request(slot, "a", max_late_ms=500))).outcome == "won"
        assert (await backend.claim(request(slot, "b", max_late_ms=500))).outcome == "taken"
        gate = backend.gate_queue("job", slot)
        assert await passive(gate) == 1  # exactly one ready message, nobody consumes it
        connection = await aio_pika.connect(store.BASE_URL)
        try:  # redeclaring it as a quorum queue is refused: it is classic
            channel = await connection.channel()
            with pytest.raises(aio_pika.exceptions.ChannelPreconditionFailed):
                await channel.declare_queue(gate, durable=True,
                                            arguments={"x-queue-type": "quorum"})
        finally:
            await connection.close()
        deadline = time.monotonic() + 15
        while True:  # x-expires removes the unused gate (a passive declare renews it:
            await asyncio.sleep(1.5)  # poll less often than the ttl)
            if await passive(gate) is None:
                break
            assert time.monotonic() < deadline, "gate queue never expired"
        await backend.close()

    run(scenario())


def test_a_quorum_gate_is_refused(namespace: str) -> None:
    async def scenario() -> None:
        backend = backend_for(namespace)
        await backend.open()
        slot = now_ms()
        connection = await aio_pika.connect(store.BASE_URL)
        try:
            channel = await connection.channel()
            await channel.declare_queue(backend.gate_queue("job", slot), durable=True,
                                        arguments={"x-queue-type": "quorum"})
            with pytest.raises(IncompatibleStoreError, match="quorum"):
                await backend.claim(request(slot, "a"))
            channel = await connection.channel()
            await channel.queue_delete(backend.gate_queue("job", slot))
        finally:
            await connection.close()
        await backend.close()

    run(scenario())


def test_returned_publish_is_not_a_win(namespace: str, monkeypatch: pytest.MonkeyPatch) -> None:
    async def no_gate(channel: Any, gate: str) -> None:
        return None  # the gate vanished between declare and publish

    async def scenario() -> None:
        backend = backend_for(namespace)
        await backend.open()
        monkeypatch.setattr(backend, "_declare_gate", no_gate)
        slot = now_ms()
        with pytest.raises(StoreError, match="missing"):
            await backend.claim(request(slot, "a"))
        assert await backend.confirm(request(slot, "a")) == 0
        assert await backend.history("job", 5) == []
        await backend.close()

    run(scenario())


def test_lost_confirmation_skips_the_slot_and_emits_error(
        namespace: str, monkeypatch: pytest.MonkeyPatch) -> None:
    log = EventLog()
    starts: list[int] = []

    async def scenario() -> None:
        backend = backend_for(namespace)
        real = backend._declare_gate
        dropped: list[asyncio.Future[Any]] = []

        async def drop_after_declare(channel: Any, gate: str) -> None:
            await real(channel, gate)
            if not dropped:  # the connection drops while the publish is in flight
                dropped.append(asyncio.ensure_future(backend._connection.close()))
                await asyncio.sleep(0)

        monkeypatch.setattr(backend, "_declare_gate", drop_after_declare)
        scheduler = log.attach(AsyncScheduler(backend, instance_id="a", jitter=0.05))
        scheduler.every("tick", "1s", lambda ctx: starts.append(ctx.slot))
        await scheduler.start()
        try:
            error = await log.wait(lambda e: e.type == "error", 5)
            await log.wait(lambda e: e.type == "success", 5)  # it reconnects for later slots
        finally:
            await scheduler.stop()
        assert isinstance(error.error, StoreError)
        assert error.slot not in starts  # never runs a slot it could not confirm

    run(scenario())


def test_history_trimmed_by_count_and_manual_runs(namespace: str) -> None:
    async def scenario() -> None:
        backend = backend_for(namespace)
        await backend.open()
        await backend.register([JobSpec("job", "every", "every 1s")])
        base = now_ms()
        for n in range(5):
            await backend.claim(request(base + n, "a"))
            await backend.finish(Finish("job", base + n, "a", 1, "success", None, 2, None, 0))
        assert (await passive(backend.history_queue("job")) or 0) <= 4
        token = await backend.start_manual("job", "m", now_ms())
        await backend.finish_manual(token, "failure", "boom", 2, None)
        records = await backend.history("job", 10)
        assert records[0].manual and records[0].error == "boom"
        assert len(records) <= 3
        assert [j.name for j in await backend.known_jobs()] == ["job"]
        await backend.register([JobSpec("job", "every", "every 1s")])  # no duplicate entry
        assert await passive(backend.jobs_queue) == 1
        # the framework that declared a job is stored with it (a new entry: it changed)
        await backend.register([JobSpec("job", "every", "every 1s", "dramatiq")])
        assert await backend.known_jobs() == [JobSpec("job", "every", "every 1s", "dramatiq")]
        await backend.register([JobSpec("job", "every", "every 1s", "dramatiq")])
        assert await passive(backend.jobs_queue) == 2
        # a finish by another owner than the winner changes nothing
        slot = now_ms() + 10
        await backend.claim(request(slot, "a"))
        assert not await backend.finish(Finish("job", slot, "b", 1, "success", None, 2, None, 0))
        await backend.close()

    run(scenario())


def test_user_connection_is_never_closed(namespace: str) -> None:
    async def scenario() -> None:
        connection = await aio_pika.connect(store.BASE_URL)
        backend = RabbitMQBackend(connection, prefix=f"{namespace}.")
        await backend.open()
        assert (await backend.claim(request(now_ms(), "a"))).outcome == "won"
        await backend.close()
        assert not connection.is_closed
        await connection.close()

    run(scenario())
