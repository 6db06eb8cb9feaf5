"""The options of a job and of a scheduler, as types: ``every("x", "10s", leese="30s")``
or ``max_attempts="3"`` are type errors (mypy, pyright), as they are errors at run time.

``**options: Unpack[JobOptions]`` in the signatures; ``Unpack`` comes from ``typing`` on
Python 3.11+ and, for checkers on 3.10, from ``typing_extensions`` (bundled with every
type checker; not needed at run time, where the annotations stay strings).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, Literal, TypedDict
from zoneinfo import ZoneInfo

from .durations import DurationLike

if TYPE_CHECKING:  # for the signatures' annotations: ``Unpack[JobOptions]``
    if sys.version_info >= (3, 11):
        from typing import Unpack as Unpack
    else:
        from typing_extensions import Unpack as Unpack

__all__ = ["JobOptions", "SchedulerOptionsDict"]


class JobOptions(TypedDict, total=False):
    """The options every job takes (docs/options.md); scheduler-wide they are defaults."""

    jitter: DurationLike
    max_late: DurationLike
    timeout: DurationLike | None
    overlap: Literal["skip", "allow"]
    max_attempts: int
    catch_up: DurationLike
    #: ``every()`` only
    offset: DurationLike
    #: ``cron()`` only: an IANA name or a ``zoneinfo.ZoneInfo``
    timezone: str | ZoneInfo
    history_size: int
    history_ttl: DurationLike | None
    #: a value, a dict merged key by key, or a callable called per run
    data: Any


class SchedulerOptionsDict(JobOptions, total=False):
    """A scheduler's options: the lease, the heartbeat, and defaults for every job."""

    lease: DurationLike
    heartbeat: DurationLike
