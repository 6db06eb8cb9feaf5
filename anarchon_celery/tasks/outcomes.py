"""Notice tracked publishes whose outcome never arrives, instead of republishing them.

With outcome tracking a beat leaves each run open for ``queue_lease`` until a worker
reports it. By default (``resend`` off) a run nobody reported is not published again:
the store marks it ``interrupted`` once that lease expires. The core's outcome watch
([`anarchon.handoff.outcomes`][anarchon.handoff.outcomes]) looks at the run then; this
module says why in the beat's log: at ERROR as a configuration error when no worker ever
reported an outcome of the entry (the workers do not call ``track_outcomes(app)``), else
at WARNING (a backlog in the queue, or a lost worker).
"""

from __future__ import annotations

import logging

from anarchon import AsyncScheduler
from anarchon.handoff import outcomes
from anarchon.handoff.outcomes import MissingOutcome

logger = logging.getLogger("anarchon.celery")


def report_missing(missing: MissingOutcome) -> None:
    """Log why a tracked entry's run has no outcome (the beat's words)."""
    if not missing.ever:
        logger.error(
            "beat entry %r slot %s: configuration error: the entry tracks outcomes but "
            "no worker has reported any of its runs, and this one had no outcome within "
            "queue_lease (%gs); the workers must call anarchon_celery.track_outcomes(app) "
            "where the app is defined (or set track False for the entry). The "
            "task was not published again (resend is off); if it is only queued it "
            "still runs once", missing.name, missing.slot, missing.queue_lease)
    else:
        logger.warning(
            "beat entry %r slot %s: no worker reported its task within queue_lease "
            "(%gs): it is still queued (a backlog) or its worker was lost; not published "
            "again (resend is off), the run is recorded interrupted", missing.name,
            missing.slot, missing.queue_lease)


class OutcomeWatch(outcomes.OutcomeWatch):
    """The core's outcome watch on ``engine`` (the beat's core scheduler), reporting in
    the beat's words."""

    def __init__(self, engine: AsyncScheduler) -> None:
        super().__init__(engine, report_missing)


__all__ = ["OutcomeWatch", "report_missing"]
