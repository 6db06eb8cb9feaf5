"""Noticing what would otherwise stay silent: skipped slots and outcomes that never arrive.

``SlotLog`` logs every skip of a marked actor's slot (``overlap`` and ``late`` at
WARNING, ``taken`` — another instance won it — at DEBUG).

``OutcomeWatch`` is the core's outcome watch (``anarchon.handoff.outcomes``): once
``queue_lease`` has passed after a tracked message was sent, it checks that a worker took
the run over (renewed its lease or recorded an outcome). If not, and no worker has ever
recorded an outcome of the job, the workers lack ``AnarchonMiddleware``: logged at ERROR
as a configuration error naming it (``report_missing``). A job whose outcomes did arrive
before gets a WARNING instead (a backlog in the queue, or a lost worker). One check per
job is pending at a time.
"""

from __future__ import annotations

import logging

from anarchon import AsyncScheduler, Event
from anarchon.handoff import outcomes
from anarchon.handoff.outcomes import MissingOutcome

logger = logging.getLogger("anarchon.dramatiq")

_SKIPS = {
    "overlap": "the job's previous run still holds its lease (overlap='skip'; a tracked "
               "run holds it until its outcome arrives or queue_lease passes)",
    "late": "it was claimed more than max_late after the slot (the scheduler was busy, "
            "paused or started late)",
    "taken": "another instance won it",
}


class SlotLog:
    """An ``on("skip")`` listener logging skipped slots of the jobs named ``names``."""

    def __init__(self, names: set[str]) -> None:
        self.names = names

    def __call__(self, event: Event) -> None:
        if event.name not in self.names:
            return
        level = logging.DEBUG if event.reason == "taken" else logging.WARNING
        logger.log(level, "job %r slot %s skipped: %s", event.name, event.slot,
                   _SKIPS.get(event.reason or "", event.reason))


def report_missing(missing: MissingOutcome) -> None:
    """Log why a tracked message's outcome did not arrive (the Dramatiq layer's words)."""
    after = ("a backup scheduler sends the slot again as the next attempt "
             "(resend=True), which may run the actor again" if missing.resend else
             "the slot is not sent again (resend=False): the actor ran at most once, "
             "and the run ends interrupted")
    if not missing.ever:
        logger.error(
            "configuration error? job %r slot %s attempt %d: the outcome of its tracked "
            "message did not arrive within queue_lease (%gs). The workers' broker needs "
            "anarchon_dramatiq.AnarchonMiddleware on this store (%s), added before "
            "Retries: anarchon_dramatiq.install_middleware(broker, STORE_URL); without "
            "it no outcome is ever recorded and, with overlap='skip', every slot within "
            "queue_lease of a sent one is skipped. (Or the message waited in the queue "
            "longer than queue_lease: raise queue_lease.) Now %s.",
            missing.name, missing.slot, missing.attempt, missing.queue_lease, missing.store,
            after)
    else:
        logger.warning("job %r slot %s attempt %d: no worker reported its message "
                       "within queue_lease (%gs): it is still queued (a backlog) or its "
                       "worker was lost; %s", missing.name, missing.slot, missing.attempt,
                       missing.queue_lease, after)


class OutcomeWatch(outcomes.OutcomeWatch):
    """The core's outcome watch ([`anarchon.handoff.outcomes`][anarchon.handoff.outcomes])
    on ``core``, reporting in the Dramatiq layer's words; the sender calls ``expect()``
    after each tracked send."""

    def __init__(self, core: AsyncScheduler) -> None:
        super().__init__(core, report_missing)


__all__ = ["OutcomeWatch", "SlotLog", "report_missing"]
