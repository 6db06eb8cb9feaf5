"""What is logged about store errors: one WARNING when an outage starts, one INFO when
it ends, whatever listeners are registered.

Every failed store call emits an ``error`` event (listeners get each one); the log says
only that the store stopped answering (with the first error, which names the store) and,
when a call succeeds again, that it answers again and how many calls failed meanwhile.
The calls failing in between are logged at DEBUG. An outage ends at the first claim or
finish the store answers (a read alone does not end it: SQLite reads while locked).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

logger = logging.getLogger("anarchon")


class OutageLog:
    """The outage state of one scheduler's store, as the log tells it."""

    def __init__(self, monotonic: Callable[[], float] = time.monotonic) -> None:
        self._monotonic = monotonic
        #: monotonic time the current outage started (None: the store answers)
        self.since: float | None = None
        self.failures = 0
        #: monotonic time the last outage ended (None: none yet)
        self.ended_at: float | None = None

    def failed(self, name: str | None, error: BaseException | None) -> None:
        """A store call (of job ``name``, if any) failed with ``error``."""
        self.failures += 1
        if self.since is None:
            self.since = self._monotonic()
            logger.warning("store not answering (job %s): %s; retrying, and saying so once "
                           "it answers", name, error)
        else:
            logger.debug("store error (job %s): %s", name, error)

    def answered(self) -> None:
        """A store call succeeded: an outage in progress is over."""
        if self.since is None:
            return
        logger.info("store answering again after %.1fs (%d failed call(s) meanwhile)",
                    self._monotonic() - self.since, self.failures)
        self.since, self.failures = None, 0
        self.ended_at = self._monotonic()

    def settling(self, lease: float) -> float:
        """Seconds to wait before taking over a run whose lease lapsed: a lease after an
        outage ended (or from now while one lasts). Its runner could not renew either;
        it gets that long to renew or record its outcome first."""
        if self.since is not None:
            return lease
        if self.ended_at is None:
            return 0.0
        return max(0.0, self.ended_at + lease - self._monotonic())
