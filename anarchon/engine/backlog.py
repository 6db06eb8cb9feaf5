"""Back-pressure made visible: slots given up as ``late`` are counted and reported.

When the store or this instance cannot keep up, claims reach the store after
``slot + max_late`` and the store refuses them as ``late``. That must never pass
silently: every such slot is counted per job (``jobs()`` shows it as
``JobInfo.skipped["late"]``, next to the ``skip`` event each one emits), and a WARNING,
at most one per ``WARN_EVERY`` seconds, says how far behind the claims are and how
many slots were given up since the last warning.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable

logger = logging.getLogger("anarchon")

#: the shortest time between two "falling behind" warnings (seconds)
WARN_EVERY = 10.0


class Backlog:
    """Counts the slots this instance gave up, per job and reason, and warns (rate-limited)
    when claims fall behind."""

    def __init__(self, *, warn_every: float = WARN_EVERY,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.warn_every = warn_every
        self._monotonic = monotonic
        self._skipped: dict[str, Counter[str]] = {}
        self._last_warning: float | None = None
        # since the last warning: slots given up, jobs they belong to, the worst delay
        self._late = 0
        self._late_jobs: set[str] = set()
        self._behind_ms = 0

    def skipped(self, name: str) -> dict[str, int]:
        """How many slots of job ``name`` this instance gave up, by reason."""
        return dict(self._skipped.get(name, {}))

    def forget(self, name: str) -> None:
        """Drop the counts of a removed job."""
        self._skipped.pop(name, None)

    def skip(self, name: str, reason: str) -> None:
        """Count one slot of ``name`` skipped for ``reason`` (``overlap`` …)."""
        self._skipped.setdefault(name, Counter())[reason] += 1

    def late(self, name: str, slot: int, store_ms: int | None) -> None:
        """Count one slot given up as ``late``: the store answered at ``store_ms`` (if
        known) a claim for ``slot``; warn if the last warning is old enough."""
        self.skip(name, "late")
        self._late += 1
        self._late_jobs.add(name)
        if store_ms is not None:
            self._behind_ms = max(self._behind_ms, store_ms - slot)
        now = self._monotonic()
        if self._last_warning is not None and now - self._last_warning < self.warn_every:
            return
        since = ("" if self._last_warning is None
                 else f" in the last {now - self._last_warning:.0f} s")
        behind = f"up to {self._behind_ms} ms after their slot" if self._behind_ms else "late"
        logger.warning(
            "anarchon is falling behind: claims reach the store %s; %d slot(s) of %d "
            "job(s) given up as late%s (the store or this instance cannot keep up: see "
            "jobs()' skipped counts, and consider fewer jobs per instance, a larger "
            "max_late or a faster store)", behind, self._late, len(self._late_jobs), since)
        self._last_warning = now
        self._late, self._late_jobs, self._behind_ms = 0, set(), 0


__all__ = ["WARN_EVERY", "Backlog"]
