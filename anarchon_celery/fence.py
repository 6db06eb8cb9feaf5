"""Publish only while this beat still holds the slot's lease.

A beat frozen (SIGSTOP, a VM pause, a long GC) between winning a slot and publishing it
must not publish after waking: a backup may already have published the next attempt.
The lease is judged by the core
([`anarchon.AsyncScheduler.lease_remaining()`][anarchon.AsyncScheduler.lease_remaining]): on
the monotonic clock, from the last renewal the store confirmed.
"""

from __future__ import annotations

import time

from anarchon import Aborted, AsyncScheduler, RunContext

#: how long to wait for the lease keeper to renew or give up a lease that looks stale
_POLL = 0.02


def lease_remaining(engine: AsyncScheduler, ctx: RunContext) -> float | None:
    """Seconds the lease of ``ctx``'s attempt is known to last on this instance.

    ``None`` when there is no lease to check (claim-only backend); ``0.0`` when this
    instance no longer holds the attempt.
    """
    return engine.lease_remaining(ctx.name, ctx.slot, ctx.attempt)


def ensure_lease(engine: AsyncScheduler, ctx: RunContext, margin: float, wait: float) -> None:
    """Return when the lease is known to last at least ``margin`` more seconds.

    A lease that looks stale (the process was paused) gets up to ``wait`` seconds for
    the lease keeper to renew it or to declare it lost. Raises
    [`anarchon.Aborted`][anarchon.Aborted]
    when the run was aborted (lost, stopped) or the lease could not be confirmed.
    """
    deadline = time.monotonic() + wait
    while True:
        ctx.signal.raise_if_aborted()
        remaining = lease_remaining(engine, ctx)
        if remaining is None or remaining >= margin:
            return
        if time.monotonic() >= deadline:
            raise Aborted("lost")
        ctx.signal.wait(_POLL)


__all__ = ["ensure_lease", "lease_remaining"]
