"""Schedules: when a job's slots fall (every, cron, at) and custom schedule types."""

from __future__ import annotations

from .custom import register_schedule_type
from .kinds import AtSchedule, CronSchedule, EverySchedule, Schedule

__all__ = ["AtSchedule", "CronSchedule", "EverySchedule", "Schedule", "register_schedule_type"]
