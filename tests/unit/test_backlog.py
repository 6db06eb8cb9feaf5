"""Back-pressure reporting (pure logic): counts per job, a rate-limited warning."""

from __future__ import annotations

import logging

import pytest

from anarchon.engine.backlog import Backlog


class Ticks:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


def test_late_slots_are_counted_and_warned_at_most_once_per_interval(
        caplog: pytest.LogCaptureFixture) -> None:
    ticks = Ticks()
    backlog = Backlog(warn_every=10, monotonic=ticks)
    with caplog.at_level(logging.WARNING, logger="anarchon"):
        backlog.late("a", 1_000, 3_500)  # the first one warns at once
        for slot in range(2_000, 7_000, 1_000):
            backlog.late("b", slot, slot + 4_000)
        backlog.skip("a", "overlap")
        assert len(warnings(caplog)) == 1
        assert "up to 2500 ms after their slot" in warnings(caplog)[0]
        assert "1 slot(s) of 1 job(s) given up as late" in warnings(caplog)[0]
        ticks.now += 10
        backlog.late("a", 9_000, 9_100)  # the interval passed: what piled up since
        [_, second] = warnings(caplog)
    assert "up to 4000 ms after their slot" in second
    assert "6 slot(s) of 2 job(s) given up as late in the last 10 s" in second
    assert backlog.skipped("a") == {"late": 2, "overlap": 1}
    assert backlog.skipped("b") == {"late": 5}
    backlog.forget("b")
    assert backlog.skipped("b") == {}
