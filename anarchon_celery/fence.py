"""Publish only while this beat still holds the slot's lease.

A beat frozen (SIGSTOP, a VM pause, a long GC) between winning a slot and publishing it
must not publish after waking: a backup may already have published the next attempt.
The lease is judged on the monotonic clock from the last renewal the store confirmed,
as the core's lease keeper judges it.

The core does not expose that time yet, so :func:`lease_remaining` reads it from the
engine's lease keeper (``AsyncScheduler._keeper``) in this one place; it returns
``None`` (no fence) if the engine has no keeper or its shape changed.
"""

from __future__ import annotations

import time
from typing import Any

from anarchon import Aborted, RunContext
from anarchon.backends.base import RunKey

#: how long to wait for the lease keeper to renew or give up a lease that looks stale
_POLL = 0.02


def lease_remaining(engine: Any, ctx: RunContext) -> float | None:
    """Seconds the lease of ``ctx``'s attempt is known to last on this instance.

    ``None`` when there is no lease to check (claim-only backend, or an engine without
    a lease keeper); ``0.0`` when this instance no longer holds the attempt.
    """
    keeper = getattr(engine, "_keeper", None)
    held_runs = getattr(keeper, "held", None)
    lease = getattr(keeper, "lease", None)
    if not isinstance(held_runs, dict) or not isinstance(lease, (int, float)):
        return None
    held = held_runs.get(RunKey(ctx.name, ctx.slot))
    if held is None or getattr(held.run, "attempt", None) != ctx.attempt:
        return 0.0
    renewed_at = getattr(held, "renewed_at", None)
    if not isinstance(renewed_at, (int, float)):
        return None
    return float(renewed_at + lease - time.monotonic())


def ensure_lease(engine: Any, ctx: RunContext, margin: float, wait: float) -> None:
    """Return when the lease is known to last at least ``margin`` more seconds.

    A lease that looks stale (the process was paused) gets up to ``wait`` seconds for
    the lease keeper to renew it or to declare it lost. Raises :class:`anarchon.Aborted`
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
