"""One run this instance executes, as the lease keeper and its deadlines see it."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from ..backends.base import HeldRun
from ..context import AbortSignal


@dataclass
class Held:
    """A run this instance executes, and when its lease was last renewed for sure."""

    run: HeldRun
    signal: AbortSignal
    #: monotonic time at which the last successful renewal (or the claim) was sent
    renewed_at: float = field(default_factory=time.monotonic)
    #: the handler returned and its outcome is being written: a "lost" answer is only
    #: that write winning the race with a renewal
    finishing: bool = False
    #: the keeper renews this run's lease at every beat; cleared when the run is dropped
    #: (it ended, was lost, handed over or detached) while it may still be in the table
    renewing: bool = True
    #: ``lost`` was reported (event and log) for this run
    told_lost: bool = False
    #: the store answered that the run's record does not exist at all (a failover to a
    #: replica that was behind, a flush, a restore), rather than that another owner holds
    #: it: once the handler ended, the slot is claimed again
    vanished: bool = False


__all__ = ["Held"]
