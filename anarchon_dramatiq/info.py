"""Reading the run a message was sent for, inside an actor (for idempotent writes)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dramatiq.middleware import CurrentMessage


@dataclass(frozen=True)
class RunInfo:
    """The job, slot (epoch ms) and attempt a message was sent for, and the run's
    ``data`` (the mark's ``data=``, merged with ``run_now(data=)``; ``None`` if none)."""

    job: str
    slot: int
    attempt: int
    data: Any = None


def run_info(message: Any = None) -> RunInfo | None:
    """The [`RunInfo`][anarchon_dramatiq.info.RunInfo] of ``message`` (default: the message being
    processed, which
    needs Dramatiq's ``CurrentMessage`` middleware); ``None`` for messages not sent by
    anarchon. Key writes by ``slot`` so a re-sent attempt does not repeat side effects."""
    if message is None:
        message = CurrentMessage.get_current_message()
        if message is None:
            return None
    options = getattr(message, "options", None) or {}
    try:
        return RunInfo(str(options["anarchon_job"]), int(options["anarchon_slot"]),
                       int(options["anarchon_attempt"]), options.get("anarchon_data"))
    except (KeyError, TypeError, ValueError):
        return None
