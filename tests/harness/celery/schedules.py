"""Schedules that decide by their own ``is_due``, as libraries write them.

``custom_schedule(kind, every)``: ``"gate"`` is a ``BaseSchedule`` subclass due every
``every`` seconds after the last run (like schedules whose ``is_due`` asks a database);
``"relative"`` is ``schedule(every, relative=True)``; ``"cron_estimate"`` is a crontab
subclass that overrides ``remaining_estimate`` to run every ``every`` seconds.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from celery.schedules import BaseSchedule, crontab, schedstate, schedule


class Gate(BaseSchedule):
    """Due once ``every`` seconds have passed since the last run (its own rule)."""

    def __init__(self, every: float) -> None:
        super().__init__()
        self.every = every

    def is_due(self, last_run_at: datetime) -> Any:
        elapsed = (self.now() - self.maybe_make_aware(last_run_at)).total_seconds()
        if elapsed >= self.every:
            return schedstate(True, self.every)
        return schedstate(False, self.every - elapsed)

    def __reduce__(self) -> Any:
        return self.__class__, (self.every,)

    def __repr__(self) -> str:
        return f"<Gate every {self.every}s>"


class EstimatedCrontab(crontab):
    """A crontab whose ``remaining_estimate`` replaces its fields (``every`` seconds)."""

    def __init__(self, every: float) -> None:
        super().__init__(minute=0)
        self.every = every

    def __reduce__(self) -> Any:  # stock beat stores schedules in its shelve file
        return self.__class__, (self.every,)

    def remaining_estimate(self, last_run_at: datetime, ffwd: Any = None) -> timedelta:
        due = self.maybe_make_aware(last_run_at) + timedelta(seconds=self.every)
        return due - self.now()

    def is_due(self, last_run_at: datetime) -> Any:
        rem = max(self.remaining_estimate(last_run_at).total_seconds(), 0)
        return schedstate(rem == 0, rem or self.every)


def custom_schedule(kind: str, every: float) -> Any:
    """The schedule object named ``kind`` (see the module doc)."""
    if kind == "gate":
        return Gate(every)
    if kind == "relative":
        return schedule(timedelta(seconds=every), relative=True)
    if kind == "cron_estimate":
        return EstimatedCrontab(every)
    raise ValueError(f"unknown custom schedule {kind!r}")
