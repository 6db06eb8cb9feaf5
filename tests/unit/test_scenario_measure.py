"""The scenario measurements on hand-written logs (pure, fast)."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from anarchon_lab.scenarios import measure

from anarchon import RunRecord
from anarchon.history import RunStatus


def begin(pid: int, slot: int, attempt: int, t: float) -> dict[str, Any]:
    return dict(kind="begin", job="job", instance=f"i{pid}", pid=pid, slot=slot,
                attempt=attempt, t=t)


def end(pid: int, slot: int, attempt: int, t: float) -> dict[str, Any]:
    return dict(kind="end", job="job", instance=f"i{pid}", pid=pid, slot=slot,
                attempt=attempt, t=t, aborted=False, signal=None)


def fault(pid: int, signal: str, t: float) -> dict[str, Any]:
    return dict(kind="fault", instance=f"i{pid}", pid=pid, signal=signal, t=t)


def record(slot: int, attempt: int, status: RunStatus) -> RunRecord:
    at = datetime.fromtimestamp(slot / 1000, timezone.utc)
    return RunRecord("job", slot, at, "i", False, attempt, "scheduled", status, at, None,
                     None, None)


def test_three_overlapping_copies_are_counted() -> None:
    log = [begin(1, 0, 1, 0.0), begin(2, 3000, 1, 3.0), begin(3, 6000, 1, 6.0),
           end(1, 0, 1, 7.0), end(2, 3000, 1, 10.0), end(3, 6000, 1, 13.0)]
    spans = measure.spans(log, "job", 20.0)
    peak, overlap = measure.concurrency(spans, {})
    assert peak == 3
    assert overlap == 7.0  # from 3 s to 10 s two or more copies run
    assert measure.starts_per_slot(spans) == 1


def test_a_killed_run_ends_at_the_kill_and_frozen_time_does_not_count() -> None:
    log = [begin(1, 0, 1, 0.0), fault(1, "SIGSTOP", 1.0), begin(2, 0, 2, 3.0),
           fault(1, "SIGCONT", 4.0), fault(1, "SIGKILL", 4.5), end(2, 0, 2, 6.0)]
    spans = measure.spans(log, "job", 10.0)
    assert [(s.attempt, s.end, s.open) for s in spans] == [(1, 4.5, False), (2, 6.0, False)]
    frozen = measure.frozen_intervals(log, 10.0)
    assert frozen == {1: [(1.0, 4.0)]}
    peak, overlap = measure.concurrency(spans, frozen)
    assert (peak, overlap) == (2, 0.5)  # only after waking, until the kill
    assert measure.starts_per_slot(spans) == 2


def test_left_running_and_lost_slots() -> None:
    log = [begin(1, 0, 1, 0.0), begin(2, 1000, 1, 1.0)]
    spans = measure.spans(log, "job", 5.0)
    live = measure.live_runs(spans, live_pids={2})
    history = [record(0, 1, "running"), record(1000, 1, "running"), record(3000, 1, "success")]
    assert measure.left_running(history, live) == 1  # slot 0: its runner is dead
    assert measure.slots_lost({0, 1000, 2000, 3000, 4000}, history, live,
                              skipped_overlap={4000}) == 2  # slots 0 and 2000
