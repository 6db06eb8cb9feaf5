"""Broker connections of a real ``celery beat -S anarchon`` over 200+ publishes, on the
Redis and the RabbitMQ broker: flat (kombu's producer pool), however many messages. The
Dramatiq layer's count is ``tests/system/dramatiq/test_connections.py``.

One beat, a SQLite store (so only the broker's connections go to its port), 20 interval
entries every 1 s (``many``): 20 publishes a second. The test samples the beat's
established TCP connections to the broker's port until 200 publishes are logged.

kombu's producer pool opens connections on demand, as many as publishes overlap, up to
``broker_pool_limit``; with the default (10) how far it grows depends on the machine's
load (seen: 6 -> 10 -> 12 -> 14 sockets on Redis, 3 -> 6 on RabbitMQ), not on the number
of messages. The beat here gets a limit of ``POOL_LIMIT`` (3), which the 20 publishes of
the first second fill: from then on a flat count is what the pool guarantees, and a
connection opened outside it (per message, or now and then) shows as growth.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.harness.celery.cluster import BROKER, CeleryCluster, broker_available
from tests.stores.rabbitmq import BASE_URL as RABBITMQ_URL
from tests.stores.rabbitmq import STORE as RABBITMQ
from tests.support import open_connections
from tests.system.celery.test_beats import SCHEDULER, require

# serial: tight timings but little CPU, so scripts/test.sh runs it apart from the
# CPU-heavy system tests; it measures one process (about 11 s per broker)
pytestmark = pytest.mark.serial

PUBLISHES = 200
#: the beat's ``broker_pool_limit``
POOL_LIMIT = 3
#: sockets one pooled connection holds (kombu's Redis transport: two per connection)
SOCKETS = {"redis": 2, "rabbitmq": 1}


@pytest.mark.parametrize("broker", ["redis", "rabbitmq"])
def test_200_publishes_keep_the_broker_connections_flat(tmp_path: Path, broker: str) -> None:
    if broker == "redis":
        require("the Redis broker", broker_available())
        url, port = BROKER, urlsplit(BROKER).port or 6379
    else:
        require("RabbitMQ", RABBITMQ.unavailable())
        url, port = RABBITMQ_URL, urlsplit(RABBITMQ_URL).port or 5672
    queue = "cc_" + uuid.uuid4().hex[:10]
    cluster = CeleryCluster(tmp_path, {
        "broker": url, "queue": queue, "backend": f"sqlite:///{tmp_path}/store.db",
        "scheduler": SCHEDULER, "many": {"count": 20, "every": 1, "task": "t.noop"},
        "pool_limit": POOL_LIMIT})
    samples: list[tuple[int, int]] = []
    try:
        pid = cluster.beat("b1").pid
        deadline = time.monotonic() + 90
        while True:
            published = len(cluster.records("publish"))
            samples.append((published, open_connections(pid, port)))
            if published >= PUBLISHES:
                break
            assert cluster.procs["b1"].poll() is None, cluster.output("b1")[-3000:]
            assert time.monotonic() < deadline, f"{published} publishes: {samples[-5:]}"
            time.sleep(0.25)
    finally:
        cluster.stop_all()
        if broker == "rabbitmq":
            _delete_queue(queue)
    most = max(count for _, count in samples)
    print(f"celery on {broker}: {samples[-1][0]} publishes, open connections to port "
          f"{port}: max {most}, last {samples[-1][1]}; samples {samples[::10]}")
    middle = [count for sent, count in samples if sent >= PUBLISHES // 4]
    assert most <= SOCKETS[broker] * POOL_LIMIT + 2 and max(middle) - min(middle) <= 2, samples


def _delete_queue(queue: str) -> None:
    from kombu import Connection

    with Connection(RABBITMQ_URL) as connection:
        connection.default_channel.queue_delete(queue)  # type: ignore[attr-defined]
