"""The ``anarchon_*`` headers a message carries for its run (docs/contract.md,
*Framework surfaces*)."""

from __future__ import annotations

from typing import Any

from ..context import RunContext


def run_headers(ctx: RunContext, *, track: bool, queue_lease: float) -> dict[str, Any]:
    """The headers of ``ctx``'s attempt. Tracked: the run is detached
    (``ctx.detach(lease=queue_lease)``, a worker finishes it) and the headers are its
    token's (``anarchon_owner`` included); untracked: job, slot and attempt only."""
    if track:
        return dict(ctx.detach(lease=queue_lease).to_headers())
    return {"anarchon_job": ctx.name, "anarchon_slot": ctx.slot,
            "anarchon_attempt": ctx.attempt}


__all__ = ["run_headers"]
