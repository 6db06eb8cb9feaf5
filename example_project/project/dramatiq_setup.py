"""The Dramatiq broker, set before any actor is declared (``shop.actors`` imports this).

Building the broker does not connect; sending or consuming does.
"""

from __future__ import annotations

import dramatiq
from django.conf import settings
from dramatiq.brokers.redis import RedisBroker
from dramatiq.middleware import CurrentMessage

broker = RedisBroker(url=settings.DRAMATIQ_BROKER_URL,  # type: ignore[no-untyped-call]
                     namespace="anarchon-example-project")
broker.add_middleware(CurrentMessage())
dramatiq.set_broker(broker)
