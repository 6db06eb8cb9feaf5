"""Both task-queue layers hand a won slot off the same way (``anarchon.handoff.sender``):
each try behind the lease check, a refused send retried until ``max_late``, and a run
this instance does not hold never sent. The Celery beat's ``Publisher`` and Dramatiq's
``ActorSender`` implement only their message and their ``send``; here each runs as the
job handler of a real scheduler (SQLite store) against real brokers (Redis, RabbitMQ).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar

import pytest

from anarchon import Aborted, AbortSignal, AsyncScheduler, RunContext, SqliteBackend
from anarchon.handoff import outcomes, sender
from anarchon.schedules.kinds import ms_to_datetime
from anarchon.testing.support import wait_until
from anarchon_celery.tasks import outcomes as celery_outcomes
from anarchon_celery.tasks.publish import Publisher
from anarchon_dramatiq import watch as dramatiq_watch
from anarchon_dramatiq.sending import ActorSender
from tests.harness.dramatiq.fixtures import RABBITMQ_URL
from tests.stores.redis import BASE_URL as REDIS_URL

LEASE, HEARTBEAT = 1.0, 0.2
#: what each layer logs when the lease check refuses a send
REFUSAL = {"celery": "not published, this beat no longer holds the slot",
           "dramatiq": "not sent, this instance no longer holds the slot"}


@dataclass
class Layer:
    """One layer's sender on a real broker whose first ``refusals`` sends fail."""

    name: str
    handler: Any
    #: ("fence", slot) and ("send", slot), in order
    steps: list[tuple[str, int]] = field(default_factory=list)
    refusals: int = 0
    #: the ``anarchon_slot`` of the first message the broker holds
    received: Callable[[], int] = lambda: -1

    def try_send(self, slot: int) -> None:
        self.steps.append(("send", slot))
        if self.refusals > 0:
            self.refusals -= 1
            raise ConnectionError("broker down (test)")


def _celery(engine: AsyncScheduler, kind: str, namespace: str) -> Iterator[Layer]:
    from celery import Celery

    url = REDIS_URL if kind == "redis" else RABBITMQ_URL
    app = Celery(namespace, broker=url, set_as_current=False)
    app.conf.broker_transport_options = {"global_keyprefix": f"{namespace}:"}
    real = app.send_task

    def flaky(name: str, args: Any = None, kwargs: Any = None, **options: Any) -> Any:
        made.try_send(options["headers"]["anarchon_slot"])
        return real(name, args, kwargs, **options)

    app.send_task = flaky  # type: ignore[method-assign,assignment]

    class Entry:
        name, task, schedule = "tick", "t.remote", 1.0
        args: ClassVar[list[Any]] = []
        kwargs: ClassVar[dict[str, Any]] = {}

    def received() -> int:
        with app.connection_for_read() as connection:
            queue = connection.SimpleQueue(namespace)
            try:
                message = queue.get(timeout=5)
                message.ack()
                return int(message.headers["anarchon_slot"])
            finally:
                queue.close()

    made = Layer("celery", Publisher(app, Entry(), {"queue": namespace}, track=False,
                                      queue_lease=60, max_late=30, engine=engine,
                                      lease=LEASE, heartbeat=HEARTBEAT), received=received)
    yield made
    if kind == "rabbitmq":  # the queue goes with the broker fixture's clean-up
        with app.connection_for_write() as connection:
            connection.default_channel.exchange_delete(namespace)  # type: ignore[attr-defined]
    app.close()


def _dramatiq(engine: AsyncScheduler, kind: str, namespace: str) -> Iterator[Layer]:
    import dramatiq
    from dramatiq import Message

    from anarchon_dramatiq.marks import Mark

    if kind == "redis":
        from dramatiq.brokers.redis import RedisBroker

        broker: dramatiq.Broker = RedisBroker(url=REDIS_URL, namespace=namespace)  # type: ignore[no-untyped-call]
    else:
        from dramatiq.brokers.rabbitmq import RabbitmqBroker

        broker = RabbitmqBroker(url=RABBITMQ_URL, confirm_delivery=True)
    real = broker.enqueue

    def flaky(message: Message[Any], *, delay: int | None = None) -> Message[Any]:
        made.try_send(message.options["anarchon_slot"])
        return real(message, delay=delay)

    broker.enqueue = flaky  # type: ignore[method-assign]

    @dramatiq.actor(broker=broker, queue_name=namespace)
    def remote() -> None: ...

    def received() -> int:
        consumer = broker.consume(namespace, timeout=5000)
        try:
            message = next(m for m in consumer if m is not None)
            consumer.ack(message)
            return int(message.options["anarchon_slot"])
        finally:
            consumer.close()

    made = Layer("dramatiq", ActorSender(remote, Mark("every", 1.0, "tick"), track=False,
                                          queue_lease=60, engine=engine, max_late=30),
                  received=received)
    yield made
    broker.close()


@pytest.fixture(params=["celery", "dramatiq"])
def layer_name(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def engine(db: str) -> AsyncScheduler:
    return AsyncScheduler(SqliteBackend(database=db), lease=LEASE, heartbeat=HEARTBEAT,
                          jitter=0, instance_id="me")


@pytest.fixture
def layer(layer_name: str, engine: AsyncScheduler, broker_kind: str, namespace: str
          ) -> Iterator[Layer]:
    made = (_celery if layer_name == "celery" else _dramatiq)(engine, broker_kind, namespace)
    built = next(made)
    real = engine.lease_remaining

    def lease_remaining(name: str, slot: int, attempt: int | None = None) -> float | None:
        built.steps.append(("fence", slot))
        return real(name, slot, attempt)

    engine.lease_remaining = lease_remaining  # type: ignore[method-assign]
    yield built
    next(made, None)


def test_both_layers_are_the_one_handoff() -> None:
    """Neither layer has its own sequence or its own watch: only its message and send."""
    for layer_class in (Publisher, ActorSender):
        assert issubclass(layer_class, sender.Handoff)
        for step in ("__call__", "deliver", "attempt", "fence", "expect_outcome"):
            assert getattr(layer_class, step) is getattr(sender.Handoff, step), step
    for watch_class in (celery_outcomes.OutcomeWatch, dramatiq_watch.OutcomeWatch):
        assert issubclass(watch_class, outcomes.OutcomeWatch)
        assert watch_class.judge is outcomes.OutcomeWatch.judge


def test_a_refused_send_is_retried_each_try_behind_the_lease_check(
        layer: Layer, engine: AsyncScheduler, caplog: pytest.LogCaptureFixture) -> None:
    layer.refusals = 2

    async def main() -> int:
        engine.every("tick", 1, layer.handler, max_attempts=1, max_late="30s")
        await engine.start()
        try:
            await wait_until(lambda: len([s for s in layer.steps if s[0] == "send"]) >= 3,
                             15, "the third try of the first slot")
            return layer.steps[0][1]
        finally:
            await engine.stop()

    with caplog.at_level(logging.INFO):
        slot = asyncio.run(main())
    first = [step for step, s in layer.steps if s == slot]
    tries = [i for i, step in enumerate(first) if step == "send"]
    assert len(tries) == 3 and all(first[i - 1] == "fence" for i in tries), layer.steps
    retries = [r.getMessage() for r in caplog.records if "retrying in" in r.getMessage()]
    assert len(retries) == 2 and all("broker down (test)" in line for line in retries)
    assert layer.received() == slot, "the slot's message reached the broker"


def test_a_run_this_instance_does_not_hold_is_not_sent(
        layer: Layer, engine: AsyncScheduler, caplog: pytest.LogCaptureFixture) -> None:
    slot = int(time.time()) * 1000

    async def main() -> None:
        engine.every("tick", "1h", layer.handler)  # declared, never claimed here
        await engine.start()
        try:
            ctx = RunContext("tick", slot, ms_to_datetime(slot), "me", False, 1,
                             "scheduled", AbortSignal(), None)
            with pytest.raises(Aborted):
                await asyncio.to_thread(layer.handler, ctx)
        finally:
            await engine.stop()

    with caplog.at_level(logging.WARNING):
        asyncio.run(main())
    assert [step for step, _ in layer.steps] and {step for step, _ in layer.steps} == {
        "fence"}, "the lease check refused before anything reached the broker"
    assert any(REFUSAL[layer.name] in r.getMessage() for r in caplog.records)
