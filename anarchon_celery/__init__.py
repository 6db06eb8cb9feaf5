"""anarchon_celery: run Celery beat on every node; each slot is published once.

``celery -A proj beat -S anarchon_celery:Scheduler`` (or ``beat_scheduler =
"anarchon_celery:Scheduler"``) on every node. Call
[`track_outcomes()`][anarchon_celery.track_outcomes] in the app
module to record each task's real outcome in anarchon's history.
"""

from __future__ import annotations

from anarchon_celery.beat.config import ConfigurationError, Settings
from anarchon_celery.beat.embedded import connect as _connect_worker_check
from anarchon_celery.beat.scheduler import Scheduler
from anarchon_celery.entries.dynamic import HANDLER, EntryError
from anarchon_celery.entries.entry import Entry
from anarchon_celery.schedules.crontab import CeleryCrontabSchedule
from anarchon_celery.tasks.publish import task_id_for
from anarchon_celery.tasks.worker import token_from_request, track_outcomes

_connect_worker_check()  # refuse `celery worker -B -S anarchon` (-S is --statedb there)

__all__ = [
    "CeleryCrontabSchedule",
    "ConfigurationError",
    "Entry",
    "EntryError",
    "HANDLER",
    "Scheduler",
    "Settings",
    "task_id_for",
    "token_from_request",
    "track_outcomes",
]
