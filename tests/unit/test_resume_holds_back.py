"""``resume()`` schedules a job again from its next slot: a slot that fell due while the
job was paused stays skipped when its claim comes late, after the instance applied the
resume (``Controls.holds_back``; found by the stateful walk of
tests/contract/test_control_stateful.py on a loaded machine)."""

from __future__ import annotations

from pathlib import Path

import anarchon
from anarchon.backends.control import ControlRecord, ControlSnapshot
from anarchon.control.changes import Control

START = 1_767_225_603.0  # 2026-01-01T00:00:03Z


def snapshot(generation: int, version: int, paused: bool) -> ControlSnapshot:
    text = Control(paused=paused, action="pause" if paused else "resume", by="t").encode()
    return ControlSnapshot(generation, {"tick": ControlRecord("tick", version, text)})


def test_a_slot_due_before_the_resume_was_applied_stays_skipped(tmp_path: Path) -> None:
    clock = anarchon.FakeClock(start=START)
    scheduler = anarchon.AsyncScheduler(anarchon.SqliteBackend(str(tmp_path / "x.db")),
                                        clock=clock, jitter=0)
    scheduler.every("tick", "1s", lambda ctx: None)
    controls = scheduler.control.controls
    controls.apply(snapshot(1, 1, paused=True))
    due = int(START * 1000) + 1000  # falls due while paused
    assert controls.holds_back("tick", due)
    clock.advance(1.05)  # the slot's claim is late: the resume is applied first
    controls.apply(snapshot(2, 2, paused=False))
    assert "tick" not in controls.paused
    assert controls.holds_back("tick", due), "a slot of the paused time ran after resume"
    assert not controls.holds_back("tick", due + 1000), "the next slot must run"


def test_no_resume_holds_nothing_back(tmp_path: Path) -> None:
    clock = anarchon.FakeClock(start=START)
    scheduler = anarchon.AsyncScheduler(anarchon.SqliteBackend(str(tmp_path / "x.db")),
                                        clock=clock, jitter=0)
    scheduler.every("tick", "1s", lambda ctx: None)
    controls = scheduler.control.controls
    controls.apply(snapshot(1, 1, paused=False))  # a record that never paused the job
    assert not controls.holds_back("tick", int(START * 1000) - 5000)
