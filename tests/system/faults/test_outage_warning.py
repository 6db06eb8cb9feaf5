"""The outage WARNING names the store and the cause when anarchon's own call timeout
fires (issue 34, 7a): a Redis of the test's own (with a password) is paused (SIGSTOP)
while a run holds its lease, so the heartbeat gets no answer and anarchon's bound on it
(max(heartbeat, lease / 2)) ends the call with a TimeoutError that has no text. The one
WARNING must name the store (password redacted) and say it was a timeout."""

from __future__ import annotations

import asyncio
import logging
import signal
import threading
import time
from pathlib import Path

import pytest

import anarchon
from tests.harness.servers import RedisLike, throwaway
from tests.system.faults.conftest import missing

PASSWORD = "s3cret-pw"


def test_a_call_timeout_warning_names_the_store_and_the_cause(
        tmp_path: Path, namespace: str, caplog: pytest.LogCaptureFixture) -> None:
    try:
        server = throwaway("redis", tmp_path, namespace, password=PASSWORD)
    except FileNotFoundError as exc:
        missing(str(exc))
    assert isinstance(server, RedisLike) and server.proc is not None
    running, release = threading.Event(), threading.Event()

    def work(ctx: anarchon.RunContext) -> None:
        running.set()
        release.wait(20)

    async def main() -> None:
        scheduler = anarchon.AsyncScheduler(anarchon.from_url(server.url), lease=2,
                                            heartbeat=0.3)
        scheduler.at("work", time.time() + 0.3, work, max_late=60)
        await scheduler.start()
        try:
            assert await asyncio.to_thread(running.wait, 10), "work never started"
            assert server.proc is not None
            server.proc.send_signal(signal.SIGSTOP)  # the store accepts, never answers
            deadline = time.monotonic() + 10
            while not [r for r in caplog.records if "not answering" in r.getMessage()]:
                assert time.monotonic() < deadline, "no outage warning within 10 s"
                await asyncio.sleep(0.1)
            server.proc.send_signal(signal.SIGCONT)
            release.set()
        finally:
            if server.proc is not None:
                server.proc.send_signal(signal.SIGCONT)
            release.set()
            await scheduler.stop(timeout=5)

    try:
        with caplog.at_level(logging.INFO, logger="anarchon"):
            asyncio.run(main())
    finally:
        server.close()
    [warning] = [r.getMessage() for r in caplog.records if "not answering" in r.getMessage()]
    assert f"127.0.0.1:{server.port}" in warning and "RedisBackend" in warning, warning
    assert "TimeoutError: no answer within anarchon's call timeout" in warning, warning
    assert PASSWORD not in warning
    assert "(job None)" not in warning and ": ;" not in warning
