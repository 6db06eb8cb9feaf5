"""Checks shared by marks (declaration) and registration: options that cannot work."""

from __future__ import annotations


def check_resend(where: str, resend: bool, max_attempts: int | None) -> None:
    """A tracked mark sends each slot once unless it asks for re-sends (``resend=True``);
    ``max_attempts`` > 1 without it would be a promise nothing keeps."""
    if not resend and max_attempts is not None and max_attempts > 1:
        raise TypeError(
            f"{where}: max_attempts={max_attempts} on a tracked mark counts re-sends after "
            "queue_lease, and tracked marks send each slot once unless they ask for "
            "re-sends: add resend=True (a message that is merely slow, or a worker without "
            "AnarchonMiddleware, then runs the actor again) or drop max_attempts")


def check_delay(where: str, delay_ms: int | None, queue_lease: float | None) -> None:
    """A tracked message must be able to start within ``queue_lease``: Dramatiq holds a
    delayed message back ``delay`` ms, so ``delay`` ≥ ``queue_lease`` means the lease
    always expires first."""
    if delay_ms is None or queue_lease is None:
        return
    if delay_ms / 1000 >= queue_lease:
        raise ValueError(
            f"{where}: delay={delay_ms} ms is not shorter than queue_lease "
            f"({queue_lease:g}s): the message would still be held back when its lease "
            f"expires, so the run would always end interrupted; use a queue_lease longer "
            f"than the delay plus the time in the queue, e.g. queue_lease="
            f"{max(60.0, 2 * delay_ms / 1000):g}")
