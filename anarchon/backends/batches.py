"""Helpers for SQL stores that judge a batch of claims or finishes in one transaction.

Two things every such store needs, whatever its SQL:

* validation before any write (``check_claims()``, ``check_finishes()``): a bad
  request anywhere in a batch refuses the whole batch, so nothing is half-written;
* rounds (``rounds()``): one set-based statement judges each of its rows against the
  same snapshot, so two requests for one job (the same run twice, two slots of one job)
  cannot go in one statement: the second must see what the first wrote. A batch is cut
  into rounds in which each job appears at most once; round ``k`` holds every job's
  ``k``-th request, and the rounds run in order in one transaction. Nearly every batch
  (a planner step: each due job once) is a single round.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

from ..jobs.name_checks import check_job_name
from .base import ClaimRequest, Finish
from .skips import SKIP_REASONS, Skip

T = TypeVar("T")
R = TypeVar("R")

CLAIM_REASONS = frozenset({"scheduled", "catch-up", "takeover"})
FINISH_STATUSES = frozenset({"success", "failure", "interrupted"})


def _check_int(value: object, what: str, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{what} must be an int, got {type(value).__name__}: {value!r}")
    if value < minimum:
        raise ValueError(f"{what} must be positive, got {value}" if minimum == 1
                         else f"{what} must be at least {minimum}, got {value}")


def check_claims(requests: Sequence[ClaimRequest]) -> None:
    """Refuse (``ValueError``/``TypeError`` naming the field) any malformed request."""
    for request in requests:
        check_job_name(request.name)
        if request.reason not in CLAIM_REASONS:
            raise ValueError(f"claim reason must be one of {sorted(CLAIM_REASONS)}, "
                             f"got {request.reason!r}")
        if request.overlap not in ("skip", "allow"):
            raise ValueError(f"overlap must be 'skip' or 'allow', got {request.overlap!r}")
        if not isinstance(request.owner, str) or not request.owner:
            raise ValueError(f"claim owner must be a non-empty str, got {request.owner!r}")
        _check_int(request.slot, "slot", -(2 ** 62))
        _check_int(request.lease_ms, "lease_ms", 1)
        _check_int(request.max_late_ms, "max_late_ms", 0)
        _check_int(request.max_attempts, "max_attempts", 0)
        _check_int(request.catch_up_ms, "catch_up_ms", 0)
        _check_int(request.expected_attempt, "expected_attempt", 0)
        if not isinstance(request.one_off, bool):
            raise TypeError(f"claim one_off must be a bool, got {request.one_off!r}")


def check_finishes(finishes: Sequence[Finish]) -> None:
    """Refuse (``ValueError``/``TypeError`` naming the field) any malformed finish."""
    for finish in finishes:
        check_job_name(finish.name)
        if finish.status not in FINISH_STATUSES:
            raise ValueError(f"finish status must be one of {sorted(FINISH_STATUSES)}, "
                             f"got {finish.status!r}")
        _check_int(finish.slot, "slot", -(2 ** 62))
        _check_int(finish.attempt, "attempt", 0)
        _check_int(finish.history_size, "history_size", 0)
        _check_int(finish.retain_runs_ms, "retain_runs_ms", 0)
        if finish.history_ttl_ms is not None:
            _check_int(finish.history_ttl_ms, "history_ttl_ms", 0)


def check_skips(skips: Sequence[Skip]) -> list[Skip]:
    """Refuse (``ValueError``/``TypeError`` naming the field) any malformed skip; the
    skips with one record per ``(job, slot)`` (the first of each, order kept)."""
    unique: dict[tuple[str, int], Skip] = {}
    for skip in skips:
        check_job_name(skip.name)
        if skip.reason not in SKIP_REASONS:
            raise ValueError(f"skip reason must be one of {sorted(SKIP_REASONS)}, "
                             f"got {skip.reason!r}")
        if not isinstance(skip.owner, str) or not skip.owner:
            raise ValueError(f"skip owner must be a non-empty str, got {skip.owner!r}")
        _check_int(skip.slot, "slot", -(2 ** 62))
        _check_int(skip.history_size, "history_size", 0)
        if skip.history_ttl_ms is not None:
            _check_int(skip.history_ttl_ms, "history_ttl_ms", 0)
        unique.setdefault((skip.name, skip.slot), skip)
    return list(unique.values())


def rounds(items: Sequence[T], job: Callable[[T], str]) -> list[list[int]]:
    """The positions of ``items`` cut into rounds where each job appears at most once:
    round ``k`` holds the ``k``-th item of every job, positions in list order."""
    seen: dict[str, int] = {}
    out: list[list[int]] = []
    for position, item in enumerate(items):
        k = seen.get(job(item), 0)
        seen[job(item)] = k + 1
        if k == len(out):
            out.append([])
        out[k].append(position)
    return out


async def lone(many: Callable[[list[T]], Awaitable[Sequence[R | Exception]]], item: T) -> R:
    """``item`` sent as a batch of one through ``many``: its answer, or its exception."""
    [answer] = await many([item])
    if isinstance(answer, Exception):
        raise answer
    return answer


__all__ = ["CLAIM_REASONS", "FINISH_STATUSES", "check_claims", "check_finishes", "check_skips",
           "lone", "rounds"]


#: the longest a claim may wait before it is applied (seconds), at most: one applied
#: later is refused unwritten by backends that can tell (SQLite waits for its write lock
#: and its one thread) and decided again from the store's state (``anarchon.engine.recovery``)
MAX_CLAIM_WAIT = 1.0


def claim_bound(requests: Sequence[ClaimRequest]) -> float:
    """How long after the call ``requests`` may still be applied: a quarter of the
    shortest lease (a claim answered later leaves too little of it), at most
    ``MAX_CLAIM_WAIT``."""
    shortest = min((r.lease_ms for r in requests if r.lease_ms > 0), default=4_000)
    return min(MAX_CLAIM_WAIT, shortest / 4000)
