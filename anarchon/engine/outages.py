"""What is logged about store errors: one WARNING when an outage starts, one INFO when
it ends, whatever listeners are registered.

Every failed store call emits an ``error`` event (listeners get each one); the log says
only that the store stopped answering (with the first error, which names the store) and,
when a call succeeds again, that it answers again and how many calls failed meanwhile.
The calls failing in between are logged at DEBUG. An outage ends at the first claim or
finish the store answers (a read alone does not end it: SQLite reads while locked).

A call sent during the outage may fail just after another call ended it (a claim that
waited for SQLite's write lock, a reply lost with the connection): such a failure within
``grace`` seconds of the end (the longest a call may wait for its answer) is the outage's
tail, logged at DEBUG. A failure after that starts a new outage, with its own WARNING.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from ..errors import StoreDataError

logger = logging.getLogger("anarchon")

#: distinct data errors logged at WARNING per scheduler (then DEBUG)
_DATA_WARNINGS = 100


def cause(error: BaseException | None) -> str:
    """One line naming what went wrong, never empty: a timeout without text says so."""
    if error is None:
        return "no error given"
    text = " ".join(str(error).split())
    if isinstance(error, (TimeoutError, asyncio.TimeoutError)) and not text:
        return "TimeoutError: no answer within anarchon's call timeout"
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


class OutageLog:
    """The outage state of one scheduler's store, as the log tells it."""

    def __init__(self, monotonic: Callable[[], float] = time.monotonic,
                 store: str = "store", grace: float = 1.0) -> None:
        self._monotonic = monotonic
        #: seconds after an outage ended during which a failure is its tail, not a new one
        self.grace = grace
        #: the store as the log names it (its repr: never a password)
        self.store = store
        self._data_errors: set[str] = set()
        #: monotonic time the current outage started (None: the store answers)
        self.since: float | None = None
        self.failures = 0
        #: monotonic time the last outage ended (None: none yet)
        self.ended_at: float | None = None

    def failed(self, name: str | None, error: BaseException | None) -> None:
        """A store call (of job ``name``, if any) failed with ``error``. A data error
        (``StoreDataError``: the store answered, with data that is not anarchon's) is no
        outage: logged once per distinct message, and the outage state is left alone."""
        job = f" (job {name})" if name is not None else ""
        if isinstance(error, StoreDataError):
            text = cause(error)
            if text in self._data_errors or len(self._data_errors) >= _DATA_WARNINGS:
                logger.debug("store data error%s: %s", job, text)
            else:
                self._data_errors.add(text)
                logger.warning("%s holds data anarchon cannot read%s: %s; not an outage: "
                               "fix or delete that key or row (said once)", self.store, job,
                               text)
            return
        now = self._monotonic()
        if (self.since is None and self.ended_at is not None
                and now - self.ended_at < self.grace):
            logger.debug("store error%s just after the outage ended (a call sent during "
                         "it): %s", job, cause(error))
            return
        self.failures += 1
        if self.since is None:
            self.since = now
            logger.warning("store %s not answering%s: %s; retrying, and saying so once it "
                           "answers", self.store, job, cause(error))
        else:
            logger.debug("store error%s: %s", job, cause(error))

    def answered(self) -> None:
        """A store call succeeded: an outage in progress is over."""
        if self.since is None:
            return
        logger.info("store %s answering again after %.1fs (%d failed call(s) meanwhile)",
                    self.store, self._monotonic() - self.since, self.failures)
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
