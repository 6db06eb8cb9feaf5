"""Notice tracked publishes whose outcome never arrives, instead of republishing them.

With outcome tracking a beat leaves each run open for ``queue_lease`` until a worker
reports it. By default (``republish`` off) a run nobody reported is not published again:
the store marks it ``interrupted`` once that lease expires. This watch looks at the run
then and says why in the beat's log: at ERROR as a configuration error when no worker
ever reported an outcome of the entry (the workers do not call ``track_outcomes(app)``),
else at WARNING (a backlog in the queue, or a lost worker).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from anarchon import RunRecord

logger = logging.getLogger("anarchon.celery")

History = Callable[[str, int], list[RunRecord]]
#: records read to find the run and any reported outcome of the entry
_READ = 50
#: after the lease ran out, time for the store to mark the run interrupted
_GRACE = 1.0


class OutcomeWatch:
    """One pending check per entry (a configuration error repeats on every slot)."""

    def __init__(self, history: History, lease: float) -> None:
        self.history = history
        self.lease = lease
        self._pending: dict[str, tuple[float, int, int, float]] = {}
        self._wake = threading.Condition()
        self._thread: threading.Thread | None = None
        self._closed = False

    def expect(self, name: str, slot: int, attempt: int, queue_lease: float) -> None:
        """A worker should report ``name``'s ``slot`` within ``queue_lease`` seconds."""
        with self._wake:
            if self._closed or name in self._pending:
                return
            due = time.monotonic() + queue_lease + self.lease + _GRACE
            self._pending[name] = (due, slot, attempt, queue_lease)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, daemon=True,
                                                name="anarchon-celery-outcomes")
                self._thread.start()
            self._wake.notify()

    def close(self) -> None:
        with self._wake:
            self._closed = True
            self._wake.notify()
        if self._thread is not None:
            self._thread.join(5)

    def _run(self) -> None:
        while True:
            with self._wake:
                if self._closed:
                    return
                now = time.monotonic()
                due = [(n, p) for n, p in self._pending.items() if p[0] <= now]
                for name, _ in due:
                    del self._pending[name]
                if not due:
                    soonest = min((p[0] for p in self._pending.values()), default=now + 60)
                    self._wake.wait(max(soonest - now, 0.01))
                    continue
            for name, (_, slot, attempt, queue_lease) in due:
                try:
                    self.check(name, slot, attempt, queue_lease)
                except Exception as exc:  # the store is down: the next slot checks again
                    logger.debug("anarchon_celery: outcome of %r not checked: %s", name, exc)

    def check(self, name: str, slot: int, attempt: int, queue_lease: float) -> None:
        """Log why ``name``'s ``slot`` has no outcome, if it has none."""
        records = self.history(name, _READ)
        run = next((r for r in records if r.slot == slot and r.attempt == attempt), None)
        if run is None or run.status != "interrupted":
            return  # reported (running, finished) or out of sight
        ever = any(r.status in ("success", "failure") and not r.manual for r in records)
        if not ever:
            logger.error(
                "beat entry %r slot %s: configuration error: the entry tracks outcomes but "
                "no worker has reported any of its runs, and this one had no outcome within "
                "queue_lease (%gs); the workers must call anarchon_celery.track_outcomes(app) "
                "where the app is defined (or set track_outcomes False for the entry). The "
                "task was not published again (republish is off); if it is only queued it "
                "still runs once", name, slot, queue_lease)
        else:
            logger.warning(
                "beat entry %r slot %s: no worker reported its task within queue_lease "
                "(%gs): it is still queued (a backlog) or its worker was lost; not published "
                "again (republish is off), the run is recorded interrupted", name, slot,
                queue_lease)


__all__ = ["OutcomeWatch"]
