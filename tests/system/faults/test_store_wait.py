"""``start(wait=True)`` and ``AsyncScheduler.run()``: a store that is down at start is
waited for (one WARNING, then one per ``WARN_EVERY``), a ``stop()`` or signal ends the
wait, and the scheduler starts normally once the store is up (catch-up included).
Our own Redis, started later on a free port."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from anarchon import AsyncScheduler, Scheduler, from_url
from anarchon.engine import store_wait
from anarchon.engine.aio import wait_event
from tests.harness.servers import Outage, throwaway
from tests.system.faults.conftest import missing

PASSWORD = "wait-s3cret"
OPTIONS: dict[str, Any] = dict(lease=2, heartbeat=0.3, jitter=0.05)


@pytest.fixture
def down_redis(tmp_path: Path, namespace: str) -> Iterator[Outage]:
    """Our own Redis with :data:`PASSWORD`, not started yet."""
    try:
        server = throwaway("redis", tmp_path, namespace, password=PASSWORD, start=False)
    except FileNotFoundError as exc:
        missing(str(exc))
    yield server
    server.close()


def warnings(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "anarchon"
            and r.levelno >= logging.WARNING and "does not answer" in r.getMessage()]


def test_async_run_starts_once_the_store_is_up(down_redis: Outage,
                                               caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="anarchon")
    up_at: list[float] = []

    async def main() -> float:
        core = AsyncScheduler(from_url(down_redis.url), **OPTIONS)
        first: list[float] = []
        ran = asyncio.Event()

        async def tick(ctx: object) -> None:
            if up_at and not first:
                first.append(time.monotonic() - up_at[0])
                ran.set()

        core.every("tick", "1s", tick)
        runner = asyncio.ensure_future(core.run(stop_timeout=2))
        await asyncio.sleep(2.0)
        assert not runner.done(), "run() ended while the store was down"
        assert not core.running
        await asyncio.to_thread(down_redis.up)
        up_at.append(time.monotonic())
        await wait_event(ran, 15)
        await core.stop(2)
        await asyncio.wait_for(runner, 10)
        assert first, "no run within 15 s of the store coming up"
        return first[0]

    after_up = asyncio.run(main())
    print(f"\nASYNC-RUN first run {after_up:.2f}s after the store came up")
    found = warnings(caplog)
    assert len(found) == 1, [r.getMessage() for r in found]
    message = found[0].getMessage()
    assert f"127.0.0.1:{down_redis.url.split(':')[-1].split('/')[0]}" in message, message
    assert PASSWORD not in caplog.text
    assert any("answered after" in r.getMessage() for r in caplog.records)
    assert after_up < store_wait.MAX_DELAY + 2


def test_a_warning_every_warn_every_seconds(down_redis: Outage,
                                            caplog: pytest.LogCaptureFixture,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    caplog.set_level(logging.WARNING, logger="anarchon")
    monkeypatch.setattr(store_wait, "WARN_EVERY", 1.0)
    monkeypatch.setattr(store_wait, "MAX_DELAY", 0.2)
    scheduler = Scheduler(from_url(down_redis.url), **OPTIONS)
    scheduler.every("tick", "1s", lambda ctx: None)
    waiter = threading.Thread(target=scheduler.start, kwargs=dict(wait=True))
    began = time.monotonic()
    waiter.start()
    time.sleep(3.5)
    scheduler.stop(1)  # from another thread: ends the wait
    waiter.join(5)
    assert not waiter.is_alive(), "stop() did not end start(wait=True)"
    count = len(warnings(caplog))
    elapsed = time.monotonic() - began
    assert 3 <= count <= int(elapsed) + 1, f"{count} warnings in {elapsed:.1f}s"


def test_sigterm_while_waiting_stops_run_cleanly(down_redis: Outage) -> None:
    """``Scheduler.run()`` in the main thread: SIGTERM while the store is down returns."""
    scheduler = Scheduler(from_url(down_redis.url), **OPTIONS)
    scheduler.every("tick", "1s", lambda ctx: None)
    timer = threading.Timer(1.5, os.kill, (os.getpid(), signal.SIGTERM))
    timer.start()
    began = time.monotonic()
    try:
        scheduler.run(stop_timeout=1)
    finally:
        timer.cancel()
    took = time.monotonic() - began
    assert took < 5, f"run() took {took:.1f}s to return after SIGTERM"
    assert not scheduler.core.running


def test_retry_delay_doubles_up_to_the_cap() -> None:
    delays = [store_wait.retry_delay(n) for n in range(1, 12)]
    assert store_wait.FIRST_DELAY * 0.8 <= delays[0] <= store_wait.FIRST_DELAY
    assert all(d <= store_wait.MAX_DELAY for d in delays)
    assert delays[-1] >= store_wait.MAX_DELAY * 0.8
    with pytest.raises(ValueError, match="failures"):
        store_wait.retry_delay(0)
