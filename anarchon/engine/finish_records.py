"""How a run's outcome is written: one [`Finish`][anarchon.backends.base.Finish] builder for every
writer.

The engine (scheduled, catch-up and takeover runs), ``run_now`` (manual runs) and the
trackers of detached runs (``anarchon.tracking``) all describe errors, convert the
history bounds and pick the retention of finished run rows here, so the three agree.
"""

from __future__ import annotations

from typing import Literal

from .. import tracebacks
from ..backends.base import Finish
from ..durations import to_ms
from ..history import RunStatus

Status = Literal["success", "failure"]


def describe(error: BaseException | None) -> str | None:
    """The error text recorded in history: the full traceback, bounded, ending with
    ``Type: message`` (``anarchon.tracebacks.describe()``; ``None``: no error)."""
    return tracebacks.describe(error)


def status_of(error: BaseException | None) -> Status:
    """``failure`` when the handler raised (or timed out), else ``success``."""
    return "failure" if error is not None else "success"


def history_ttl_ms(history_ttl: float | None) -> int | None:
    """The ``history_ttl`` option (seconds) as the store wants it (ms; ``None``: none)."""
    return to_ms(history_ttl) if history_ttl is not None else None


def build_finish(name: str, slot: int, owner: str, attempt: int, status: RunStatus,
                 error: str | None, *, history_size: int, history_ttl: float | None,
                 retain_runs_ms: int) -> Finish:
    """The fenced write that records attempt ``attempt`` of ``(name, slot)`` as ended.

    ``retain_runs_ms`` comes from ``anarchon.jobs.definition.retention_ms()``, the one rule of
    how long a finished run row is kept.
    """
    return Finish(name, slot, owner, attempt, status,
                  error, history_size, history_ttl_ms(history_ttl), retain_runs_ms)
