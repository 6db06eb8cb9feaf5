"""Run now (``trigger()``) of a marked actor and of a dynamic job on an actor's handler,
with three real ``anarchon-dramatiq`` schedulers and a real worker: each request sends
exactly one message, within a second or two, and history holds one ``manual`` record
with the real outcome (``success``: a manual run succeeds when its message is sent),
never a failure for a send that did not happen.

The ``manual`` scenario of ``app.py`` declares ``report`` every hour (tracked), so no
scheduled slot comes near the test. Timings: lease 2 s, heartbeat 0.3 s.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from anarchon import AsyncScheduler, RunRecord, from_url
from tests.harness.dramatiq.rig import LEASE, Rig


@pytest.fixture
def rig(tmp_path: Path, broker_kind: str, namespace: str, store: str) -> Iterator[Rig]:
    made = Rig(tmp_path, broker_kind, namespace, store, "manual")
    yield made
    made.stop()


def call(store: str, fn: Any) -> Any:
    async def main() -> Any:
        scheduler = AsyncScheduler(from_url(store), instance_id="test")
        try:
            return await fn(scheduler)
        finally:
            await scheduler.backend.close()

    return asyncio.run(main())


def trigger(store: str, job: str) -> str:
    async def main(scheduler: AsyncScheduler) -> str:
        return await scheduler.trigger(job)

    result: str = call(store, main)
    return result


def history(store: str, job: str) -> list[RunRecord]:
    async def main(scheduler: AsyncScheduler) -> list[RunRecord]:
        return await scheduler.history(job, 10)

    result: list[RunRecord] = call(store, main)
    return result


def sent_for(lines: list[dict[str, Any]], job: str) -> list[dict[str, Any]]:
    return [r for r in lines if r["kind"] == "sent" and r["job"] == job]


def test_run_now_sends_one_message_and_records_the_outcome(rig: Rig, store: str) -> None:
    rig.workers("w1")
    rig.schedulers("s0", "s1", "s2")
    call(store, lambda s: s.add_job("adhoc", handler="dramatiq:report", every="1h",
                                    params={"kwargs": {"who": "ops"}}))
    latencies: dict[str, float] = {}
    for job in ("report", "adhoc"):
        asked = time.time()
        trigger(store, job)

        def sent_now(lines: list[dict[str, Any]], job: str = job) -> list[dict[str, Any]]:
            return sent_for(lines, job)

        def processed(lines: list[dict[str, Any]], job: str = job) -> bool:
            return any(r["kind"] == "end" and r["job"] == job for r in lines)

        sent = rig.wait_for(sent_now, 10, f"the message of Run now of {job!r}")[0]
        latencies[job] = sent["t"] - asked
        rig.wait_for(processed, 10, f"the worker to process {job!r}")

        def recorded(_: Any, job: str = job) -> list[RunRecord]:
            return [r for r in history(store, job) if r.status != "running"]

        records = rig.wait_for(recorded, 10, f"the outcome of {job!r}")
        assert [(r.reason, r.status) for r in records] == [("manual", "success")], records
    # nothing more is sent for either request: wait past two leases, with the cluster
    # running (a backup taking a manual run over would send by then)
    settled = time.time() + 2 * LEASE + 1
    rig.wait_for(lambda _: time.time() > settled, 2 * LEASE + 5, "two leases to pass")
    lines = rig.records()
    assert len(sent_for(lines, "report")) == 1 and len(sent_for(lines, "adhoc")) == 1
    ends = [r for r in lines if r["kind"] == "end"]
    assert sorted(r["job"] for r in ends) == ["adhoc", "report"]
    assert next(r for r in ends if r["job"] == "adhoc")["kwargs"] == {"who": "ops"}
    for job in ("report", "adhoc"):
        records = history(store, job)
        assert [(r.reason, r.status) for r in records] == [("manual", "success")], records
    print(f"Run now request -> message sent: {latencies}")
    assert all(latency < 3.0 for latency in latencies.values()), latencies
