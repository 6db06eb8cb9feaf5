"""Skip records: a slot given up (``late``, ``overlap``) written to the job's history.

A lease store decides a skip inside its claim step; the instance that was answered
``late`` or ``overlap`` then asks the store to record it
([`SkipStore.record_skips()`][anarchon.backends.capabilities.SkipStore.record_skips],
one call for the skips of one planner step). Every instance answered ``late`` for a
slot asks, so the store
writes at most one record per slot: history row ``attempt`` 0, ``status`` ``"skipped"``,
``reason`` the skip's, ``started_at`` = ``finished_at`` = when it was written. An
``overlap`` skip is always recorded (the store itself marked the slot skipped); a ``late``
one only if the slot has no run row (a slot another instance claimed in time ran). The
job's skip records are then bounded by ``history_size`` and ``history_ttl`` as a finish
bounds its attempts, but on their own: skips never push runs out of history, and the
skips of a job that never finishes cannot pile up.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

SkipReason = Literal["late", "overlap"]
SKIP_REASONS: frozenset[str] = frozenset({"late", "overlap"})


@dataclass(frozen=True)
class Skip:
    """A slot this instance gave up, to be written to history (see the module doc)."""

    name: str
    slot: int
    owner: str
    reason: SkipReason
    history_size: int
    history_ttl_ms: int | None


__all__ = ["SKIP_REASONS", "Skip", "SkipReason"]
