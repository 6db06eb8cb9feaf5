"""anarchon_celery: run Celery beat on every node; each slot is published once.

``celery -A proj beat -S anarchon_celery:Scheduler`` (or ``beat_scheduler =
"anarchon_celery:Scheduler"``) on every node. Call
[`track_outcomes()`][anarchon_celery.track_outcomes] in the app
module to record each task's real outcome in anarchon's history.
"""

from __future__ import annotations

from .config import ConfigurationError, Settings
from .crontab import CeleryCrontabSchedule
from .dynamic import HANDLER, EntryError
from .entries import Entry
from .publish import task_id_for
from .scheduler import Scheduler
from .worker import token_from_request, track_outcomes

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
