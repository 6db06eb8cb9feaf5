"""anarchon: leaderless distributed job scheduling.

Every instance registers the same jobs and computes the same slots; an atomic claim in a
shared store lets exactly one instance run each slot, under a heartbeated lease that a
backup takes over when the runner dies, freezes or stops.
"""

from __future__ import annotations

from .backends import Backend, ClaimBackend, LeaseBackend, SqliteBackend, from_url
from .clock import Clock, FakeClock, SystemClock
from .context import AbortSignal, RunContext, RunToken
from .control.changes import Change
from .durations import DurationLike, parse_duration
from .engine.scheduler import AsyncScheduler
from .engine.sync_scheduler import Scheduler
from .errors import (
    Aborted,
    AnarchonError,
    IncompatibleStoreError,
    JobNotFoundError,
    JobTimeout,
    StoreDataError,
    StoreError,
    TriggerRefusedError,
)
from .events import Event
from .history import JobInfo, RunRecord
from .jobs.global_api import at, configure, cron, every, get_scheduler, start_all, stop_all
from .schedules.custom import register_schedule_type
from .tracking import AsyncTracker, Tracker

__version__ = "0.1.0"


def __getattr__(name: str) -> object:
    # Backends whose drivers are optional load on first use.
    lazy = {
        "RedisBackend": "anarchon.backends.redis",
        "ValkeyBackend": "anarchon.backends.redis",
        "PostgresBackend": "anarchon.backends.postgres",
        "RabbitMQBackend": "anarchon.backends.rabbitmq",
        "NatsBackend": "anarchon.backends.nats",
    }
    if name in lazy:
        import importlib

        return getattr(importlib.import_module(lazy[name]), name)
    raise AttributeError(f"module 'anarchon' has no attribute {name!r}")


__all__ = [
    "Aborted",
    "AbortSignal",
    "AnarchonError",
    "AsyncScheduler",
    "AsyncTracker",
    "Change",
    "Backend",
    "ClaimBackend",
    "Clock",
    "DurationLike",
    "Event",
    "FakeClock",
    "IncompatibleStoreError",
    "JobInfo",
    "JobNotFoundError",
    "JobTimeout",
    "LeaseBackend",
    "RunContext",
    "RunRecord",
    "register_schedule_type",
    "RunToken",
    "Scheduler",
    "SqliteBackend",
    "StoreDataError",
    "StoreError",
    "SystemClock",
    "Tracker",
    "TriggerRefusedError",
    "at",
    "configure",
    "cron",
    "every",
    "from_url",
    "get_scheduler",
    "parse_duration",
    "start_all",
    "stop_all",
]
