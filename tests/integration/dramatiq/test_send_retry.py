"""A send that fails is retried with backoff until the slot is ``max_late`` late
(``anarchon.handoff.retry``, as the Celery layer's publish): a broker that refuses twice
and then answers still gets the slot's one message, through the outbox's few threads (so
the retries open no broker connection of their own, issue 32). Real brokers: Redis and
RabbitMQ."""

from __future__ import annotations

import logging
import threading
from typing import Any

import dramatiq
import pytest
from dramatiq import Broker, Message

import anarchon_dramatiq as ad
from anarchon_dramatiq import outbox
from tests.harness.dramatiq.fixtures import RABBITMQ_URL, history_of, run_scheduler
from tests.stores.redis import BASE_URL as REDIS_URL


def _real_broker(kind: str, namespace: str) -> Broker:
    if kind == "redis":
        from dramatiq.brokers.redis import RedisBroker

        return RedisBroker(url=REDIS_URL, namespace=namespace)  # type: ignore[no-untyped-call]
    from dramatiq.brokers.rabbitmq import RabbitmqBroker

    return RabbitmqBroker(url=RABBITMQ_URL, confirm_delivery=True)


def test_a_failed_send_is_retried_until_the_broker_answers(
        broker_kind: str, namespace: str, db: str, caplog: pytest.LogCaptureFixture) -> None:
    broker = _real_broker(broker_kind, namespace)
    real_enqueue = broker.enqueue
    refusals = [2]
    threads: set[int] = set()

    def flaky(message: Message[Any], *, delay: int | None = None) -> Message[Any]:
        threads.add(threading.get_ident())
        if refusals[0] > 0:
            refusals[0] -= 1
            raise ConnectionError("broker down (test)")
        return real_enqueue(message, delay=delay)

    broker.enqueue = flaky  # type: ignore[method-assign]

    @ad.every("1s", max_attempts=1, max_late="30s")
    @dramatiq.actor(broker=broker, queue_name=namespace)
    def report() -> None: ...

    def sent() -> bool:
        return any(r.status == "success" for r in history_of(db, "report"))

    try:
        with caplog.at_level(logging.INFO, "anarchon.dramatiq"):
            run_scheduler(db, broker, sent, 20)
        retries = [r.getMessage() for r in caplog.records if "retrying in" in r.getMessage()]
        assert len(retries) == 2, retries
        assert all("broker down (test)" in line for line in retries)
        records = [r for r in history_of(db, "report") if r.status == "success"]
        first = min(records, key=lambda r: r.slot)
        assert first.attempt == 1
        assert len(threads) <= outbox.SEND_THREADS, "every try goes through the outbox"
        consumer = broker.consume(namespace, timeout=5000)
        try:
            message = next(m for m in consumer if m is not None)
            assert message.options["anarchon_slot"] == first.slot
            consumer.ack(message)
        finally:
            consumer.close()
    finally:
        broker.close()
