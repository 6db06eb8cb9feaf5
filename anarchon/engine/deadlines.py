"""The local lease deadline: a run is aborted when its lease may have expired, by a
timer that no store call can delay.

A runner cut off from the store learns nothing from it, so it judges its leases alone:
the lease of a run lasts at least ``lease`` from the moment the last renewal the store
confirmed was *sent* (the store sets ``lease_until`` when it applies the renewal, which
is later), measured on this process's monotonic clock. At ``deadline()`` — that send
time + ``lease`` - :func:`safety_margin` — the run's ``ctx.signal`` aborts with reason
``lost``, on a thread of its own (:class:`Deadlines`): a heartbeat hanging on a silent
network, a blocked event loop or a slow driver cannot delay it. A backup cannot start
the run before the store's lease expired, so the signal fires before any backup starts
attempt 2, provided the clocks behave as docs/guarantees.md states (monotonic here,
rates within the margin, no step of the store's clock forward).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..backends.base import RunKey
    from .held_run import Held

logger = logging.getLogger("anarchon")

#: the margin is this fraction of the lease (clock rate differences, timer latency) ...
MARGIN_FRACTION = 0.02
#: ... and at least this many seconds (thread wake-up on a busy machine) ...
MARGIN_MIN = 0.2
#: ... and at most this fraction of the lease
MARGIN_MAX_FRACTION = 0.25


def safety_margin(lease: float) -> float:
    """Seconds before the earliest possible expiry of a lease at which its run is
    aborted: 2 % of the lease, at least 0.2 s, at most a quarter lease (30 s → 0.6 s,
    3 s → 0.2 s)."""
    return min(lease * MARGIN_MAX_FRACTION, max(MARGIN_MIN, lease * MARGIN_FRACTION))


class Deadlines:
    """Aborts the runs of ``runs`` whose lease deadline passed: ``on_due(held)`` is called
    on the timer's thread for each entry still ``renewing`` and not ``finishing`` whose
    deadline (``renewed_at + lease - margin``) is not after now.

    ``monotonic`` is the clock (fake in unit tests, which call :meth:`due` directly);
    :meth:`start` runs the timer thread, :meth:`poke` makes it look again (a run was
    added), :meth:`stop` ends it.
    """

    def __init__(self, runs: dict[RunKey, Held], lease: float,
                 on_due: Callable[[Held], None],
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.runs = runs
        self.lease = lease
        self.margin = safety_margin(lease)
        self._on_due = on_due
        self._monotonic = monotonic
        self._cond = threading.Condition()
        self._poked = False
        self._stopped = False
        self._thread: threading.Thread | None = None

    def deadline(self, held: Held) -> float:
        """The monotonic time at which ``held`` is aborted unless renewed meanwhile."""
        return held.renewed_at + self.lease - self.margin

    def due(self, now: float) -> tuple[list[Held], float | None]:
        """The entries whose deadline is not after ``now``, and the earliest deadline of
        the others (``None``: nothing to watch)."""
        expired: list[Held] = []
        following: float | None = None
        for held in list(self.runs.values()):  # a copy: other threads change the table
            if not held.renewing or held.finishing:
                continue
            at = self.deadline(held)
            if at <= now:
                expired.append(held)
            elif following is None or at < following:
                following = at
        return expired, following

    def check(self) -> float | None:
        """Abort what is due now; the next deadline."""
        expired, following = self.due(self._monotonic())
        for held in expired:
            try:
                self._on_due(held)
            except Exception:  # never let one run stop the timer of the others
                logger.exception("aborting run %s at its lease deadline", held.run.key)
        return following

    def start(self) -> None:
        with self._cond:
            self._stopped = False
        self._thread = threading.Thread(target=self._run, name="anarchon-lease-deadline",
                                        daemon=True)
        self._thread.start()

    def poke(self) -> None:
        with self._cond:
            self._poked = True
            self._cond.notify()

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(5)

    def _run(self) -> None:
        while True:
            following = self.check()
            with self._cond:
                if self._stopped:
                    return
                if self._poked:
                    self._poked = False
                    continue
                # threading waits on the monotonic clock; a renewal meanwhile moves the
                # deadline later: the next check finds it not due and sleeps again
                self._cond.wait(None if following is None
                                else max(0.0, following - self._monotonic()))


__all__ = ["Deadlines", "safety_margin"]
