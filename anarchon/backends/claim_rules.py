"""The claim ladder of [`ClaimRequest`][anarchon.backends.base.ClaimRequest] as pure
functions, for the stores that judge claims in Python: SQLite and the Django store (its
lone claim and its batches). Each store reads the facts (the run row, the job's first
registration, its control version, the store's time) in its own transaction and writes
what the answer implies; the rules themselves are here, once. Redis (Lua) and
PostgreSQL (SQL) keep theirs in their scripts; the conformance suite
(``anarchon.testing``) judges them all alike.
"""

from __future__ import annotations

from .base import EARLY_TOLERANCE_MS, ClaimOutcome, ClaimRequest


def refusal(req: ClaimRequest, first_seen: int | None, version: int,
            now: int) -> ClaimOutcome | None:
    """Why a scheduled or catch-up claim is refused before its run row is looked at, in
    the ladder's order (``early``, ``stale``, ``late``), or ``None`` to go on.

    ``first_seen``: when the job was first registered (store clock, ms; ``None``: it
    is not registered; read only for a catch-up); ``version``: the job's stored control
    version (0: no record); ``now``: the store's time."""
    if req.slot - now > EARLY_TOLERANCE_MS:
        return "early"
    if version > req.version:
        return "stale"
    if req.reason == "scheduled" and now > req.slot + req.max_late_ms:
        return "late"
    if req.reason == "catch-up" and (
            first_seen is None or (first_seen >= req.slot and not req.one_off)
            or req.slot <= now - req.catch_up_ms):
        return "late"
    return None


def takeover_open(req: ClaimRequest, running: bool, attempt: int, lease_until: int,
                  now: int) -> bool:
    """Whether a takeover may go on: the run is still running at the attempt the
    request expects, with an expired lease (else the answer is ``taken``)."""
    return running and attempt == req.expected_attempt and lease_until <= now


def exhausted(req: ClaimRequest, counted: int, handed_over: bool) -> bool:
    """Whether a takeover finds ``max_attempts`` counted attempts started (a hand-over
    does not count): the run is then marked interrupted and the answer is
    ``exhausted``."""
    return not handed_over and counted >= req.max_attempts


__all__ = ["exhausted", "refusal", "takeover_open"]
