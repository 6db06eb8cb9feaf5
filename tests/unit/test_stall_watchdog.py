"""The loop watchdog warns while the loop is blocked, once per stall, naming the jobs."""

from __future__ import annotations

import logging
import threading
import time

import pytest

from anarchon.engine.watchdog import LoopWatchdog


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "event loop blocked" in r.getMessage()]


def test_warns_during_a_stall_once_naming_the_busy_jobs(
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="anarchon")
    dog = LoopWatchdog(0.2, lambda: ["blocking-export"])
    dog.start()
    try:
        for _ in range(10):  # a loop turning every 50 ms: no warning
            dog.turned()
            time.sleep(0.05)
        assert _warnings(caplog) == []
        warned = threading.Event()
        deadline = time.monotonic() + 5
        while not _warnings(caplog) and time.monotonic() < deadline:  # a stall: no turns
            warned.wait(0.05)
        during = _warnings(caplog)
        assert len(during) == 1 and "blocking-export" in during[0], during
        warned.wait(0.6)  # the same stall goes on: still one warning
        assert len(_warnings(caplog)) == 1
    finally:
        dog.stop()
