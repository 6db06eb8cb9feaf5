"""A finish that meets a store outage is retried until the store records it.

Our own Redis (append-only file, ``appendfsync always``) on a free port, two schedulers
(lease 2 s, heartbeat 0.3 s) sharing one ``at`` job. The winner's handler returns while
the Redis is ``kill -9``-ed; the Redis comes back 3 s later (longer than the lease), on
the same port. The outcome must be recorded as attempt 1's success once the store
answers, and no attempt 2 may start on either instance (docs/guarantees.md, "the store
is down when a run ends").
"""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import pytest

import anarchon
from anarchon import Event
from tests.faults.conftest import missing
from tests.faults.servers import throwaway

pytestmark = pytest.mark.slow

LEASE, HEARTBEAT, OUTAGE, DEADLINE = 2.0, 0.3, 3.0, 20.0


def test_a_finish_during_an_outage_is_recorded_when_the_store_returns(
        tmp_path: Path, namespace: str) -> None:
    try:
        server = throwaway("redis", tmp_path, namespace, aof=True, sigkill=True)
    except FileNotFoundError as exc:
        missing(str(exc))
    running, release = threading.Event(), threading.Event()
    starts: list[Event] = []

    def work(ctx: anarchon.RunContext) -> None:
        running.set()
        assert release.wait(DEADLINE), "the test never released the handler"

    async def main() -> list[anarchon.RunRecord]:
        when = time.time() + 0.5
        schedulers = [anarchon.AsyncScheduler(anarchon.from_url(server.url), lease=LEASE,
                                              heartbeat=HEARTBEAT) for _ in range(2)]
        for scheduler in schedulers:
            scheduler.at("work", when, work, max_late=60)
            scheduler.on("start", starts.append)
            await scheduler.start()
        try:
            assert await asyncio.to_thread(running.wait, DEADLINE), "work never started"
            server.down()  # kill -9 while the handler runs
            release.set()  # it returns while the store is away: the finish fails
            await asyncio.sleep(OUTAGE)
            server.up()
            deadline = time.monotonic() + DEADLINE
            while True:
                records = await schedulers[0].history("work", 10)
                if any(r.status != "running" for r in records):
                    break
                assert time.monotonic() < deadline, f"outcome never recorded: {records}"
                await asyncio.sleep(0.1)
            # a takeover would need a lapsed lease and a heartbeat to see it
            await asyncio.sleep(LEASE + 3 * HEARTBEAT)
            return await schedulers[0].history("work", 10)
        finally:
            for scheduler in schedulers:
                await scheduler.stop(timeout=2)

    try:
        records = asyncio.run(main())
    finally:
        server.close()
    assert [(r.attempt, r.status) for r in records] == [(1, "success")]
    assert [e.attempt for e in starts] == [1]
