"""Broker connections of a real ``anarchon-dramatiq`` process over 200 sends: a few,
however many messages (``anarchon_dramatiq.outbox``). Dramatiq's RabbitMQ broker keeps
one connection per thread and the core runs each run in a thread of its own, so before
the outbox every message opened an AMQP connection that stayed open.

One scheduler runs the ``control`` scenario of ``app.py`` (``tick`` and ``clock`` every
1 s) plus 20 dynamic jobs every 1 s on the ``dramatiq:echo`` handler: 22 sends a second.
The test samples the process's established TCP connections to the broker's port
(``/proc``) until the scheduler has logged 200 sends. On RabbitMQ the count must stay a
few however many sends: at most two per send thread at any sample and at most one per
send thread for most of the last quarter. (CI once saw 5 in one 0.25 s sample under load,
4 before and after; a send thread replacing a failed connection while the old socket
closes would do that, but the cause was not confirmed.)
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from anarchon import AsyncScheduler, from_url
from anarchon_dramatiq.outbox import SEND_THREADS
from tests.harness.dramatiq.fixtures import RABBITMQ_URL
from tests.harness.dramatiq.rig import Rig
from tests.stores.redis import BASE_URL as REDIS_URL
from tests.support import open_connections

SENDS = 200
DYNAMIC = 20


@pytest.fixture
def rig(tmp_path: Path, broker_kind: str, namespace: str, store: str) -> Iterator[Rig]:
    made = Rig(tmp_path, broker_kind, namespace, store, "control")
    yield made
    made.stop()


def port_of(url: str, default: int) -> int:
    return urlsplit(url).port or default


def add_jobs(store: str) -> None:
    async def main() -> None:
        scheduler = AsyncScheduler(from_url(store), instance_id="test")
        try:
            for n in range(DYNAMIC):
                await scheduler.add_job(f"echo{n}", handler="dramatiq:echo", every="1s",
                                        params={"args": [n]})
        finally:
            await scheduler.backend.close()

    asyncio.run(main())


def test_200_sends_open_a_few_broker_connections(rig: Rig, broker_kind: str,
                                                 store: str) -> None:
    rig.schedulers("s1")
    pid = rig.procs["s1"].pid
    port = (port_of(RABBITMQ_URL, 5672) if broker_kind == "rabbitmq"
            else port_of(REDIS_URL, 6379))
    add_jobs(store)
    samples: list[tuple[int, int]] = []  # (sends so far, open connections)
    deadline = time.monotonic() + 60
    while True:
        sent = len(rig.records("sent"))
        samples.append((sent, open_connections(pid, port)))
        if sent >= SENDS:
            break
        assert rig.procs["s1"].poll() is None, rig.output("s1")[-3000:]
        assert time.monotonic() < deadline, f"only {sent} sends in 60 s: {samples[-5:]}"
        time.sleep(0.25)
    most = max(count for _, count in samples)
    print(f"{broker_kind}: {samples[-1][0]} sends, open connections to port {port}: "
          f"max {most}, last {samples[-1][1]}; samples {samples[::8]}")
    if broker_kind == "rabbitmq":  # only the broker's connections go to this port
        late = sorted(count for sent, count in samples if sent >= SENDS * 3 // 4)
        assert most <= 2 * SEND_THREADS and late[len(late) // 2] <= SEND_THREADS, samples
    else:  # the Redis store shares the port: flat is what counts
        middle = [count for sent, count in samples if sent >= SENDS // 4]
        assert max(middle) - min(middle) <= SEND_THREADS and most <= 40, samples
    assert "Too many open files" not in rig.output("s1")
