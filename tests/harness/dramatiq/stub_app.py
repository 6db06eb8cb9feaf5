"""A StubBroker app for the CLI unit tests (``MODULE:NAME`` picks ``broker``)."""

from __future__ import annotations

import dramatiq
from dramatiq.brokers.stub import StubBroker

import anarchon_dramatiq as ad

broker = StubBroker()
empty_broker = StubBroker()


@ad.every("1h", jitter=0)
@dramatiq.actor(broker=broker)
def hourly() -> None: ...
