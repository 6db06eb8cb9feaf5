"""Act only while this instance still holds the run: the last check before a side effect
that must happen at most once per slot (a framework layer publishing a message).

A process frozen (SIGSTOP, a VM pause, a long GC) between winning a slot and acting on it
must not act after waking: its lease may have expired and a backup may already have run
the next attempt. The lease is judged by the core
([`anarchon.AsyncScheduler.lease_remaining()`][anarchon.AsyncScheduler.lease_remaining]): on
the monotonic clock, from the last renewal the store confirmed.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from ..context import RunContext
from ..errors import Aborted

if TYPE_CHECKING:
    from ..engine.scheduler import AsyncScheduler

#: how long to wait for the lease keeper to renew or give up a lease that looks stale
POLL = 0.02


def ensure_lease(engine: AsyncScheduler, ctx: RunContext, margin: float, wait: float) -> None:
    """Return when the lease of ``ctx``'s attempt is known to last at least ``margin``
    more seconds on this instance.

    A lease that looks stale (the process was paused) gets up to ``wait`` seconds for the
    lease keeper to renew it or to declare it lost. Returns at once for a manual run
    (``trigger()``, ``run_now()``: it holds no lease, and no backup ever runs it again)
    and where there is no lease to judge (a claim-only backend). Raises
    [`anarchon.Aborted`][anarchon.Aborted] when the run was aborted (lost, stopped) or the
    lease could not be confirmed within ``wait``.
    """
    if ctx.manual:
        return
    deadline = time.monotonic() + wait
    while True:
        ctx.signal.raise_if_aborted()
        remaining = engine.lease_remaining(ctx.name, ctx.slot, ctx.attempt)
        if remaining is None or remaining >= margin:
            return
        if time.monotonic() >= deadline:
            raise Aborted("lost")
        ctx.signal.wait(POLL)


def send_margin(engine: AsyncScheduler) -> tuple[float, float]:
    """``(margin, wait)`` for [`ensure_lease()`][anarchon.handoff.fence.ensure_lease] from the
    scheduler's options: the lease must outlast the send by a heartbeat (at most a
    quarter of the lease), and a stale-looking one gets two leases to be settled."""
    options = engine.options
    return min(options.heartbeat, options.lease / 4), 2 * options.lease


__all__ = ["POLL", "ensure_lease", "send_margin"]
