"""Claims and finishes on PostgreSQL, lone or batched, as one transaction each.

A batch (a lone claim is a batch of one) goes in one round trip: the advisory locks of
all its jobs (one statement, in key order), then per round (see
``anarchon.backends.batches``) one statement for the new slots and one for the
takeovers, each over arrays (``unnest``); the new-slot statement holds the version fence
(a subselect of the job's control version, so no extra round trip); finishes need no
lock. Deadlocks and
serialisation failures roll the whole transaction back and it is sent again.

Each transaction starts by asking for generic plans of its prepared statements (for
that transaction only): PostgreSQL otherwise plans the claim statement anew on every
call, which took more than half of a lone claim (1.1 ms planning, 0.6 ms executing).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Final, TypeVar, cast

import psycopg
import psycopg_pool
from psycopg import errors as pg_errors
from psycopg import sql

from ...errors import StoreError
from ..base import ClaimOutcome, ClaimRequest, ClaimResult, Finish
from ..batches import rounds
from .links import Query, Row, Statement

_RETRIES: Final = 5
#: how many times a call whose connection was dropped is sent again (a new connection)
DROPPED_RETRIES: Final = 2
T = TypeVar("T")
#: for this transaction only (set_config's ``is_local``), so a user's pool is unchanged
_GENERIC_PLANS: Final[Statement] = (
    sql.SQL("SELECT set_config('plan_cache_mode', 'force_generic_plan', true)"), {})


def _columns(items: Sequence[Any], positions: list[int],
             fields: dict[str, Callable[[Any], object]]) -> dict[str, list[object]]:
    chosen = [items[p] for p in positions]
    columns: dict[str, list[object]] = {"idx": list(positions)}
    for key, get in fields.items():
        columns[key] = [get(item) for item in chosen]
    return columns


_NEW: Final[dict[str, Callable[[ClaimRequest], object]]] = {
    "jobs": lambda r: r.name, "slots": lambda r: r.slot, "owners": lambda r: r.owner,
    "reasons": lambda r: r.reason, "lease_ms": lambda r: r.lease_ms,
    "max_late_ms": lambda r: r.max_late_ms, "catch_up": lambda r: r.reason == "catch-up",
    "catch_up_ms": lambda r: r.catch_up_ms, "skip_overlap": lambda r: r.overlap == "skip",
    "versions": lambda r: r.version, "one_off": lambda r: r.one_off,
}
_TAKEOVER: Final[dict[str, Callable[[ClaimRequest], object]]] = {
    "jobs": lambda r: r.name, "slots": lambda r: r.slot, "owners": lambda r: r.owner,
    "lease_ms": lambda r: r.lease_ms, "expected": lambda r: r.expected_attempt,
    "max_attempts": lambda r: r.max_attempts,
}
_FINISH: Final[dict[str, Callable[[Finish], object]]] = {
    "jobs": lambda f: f.name, "slots": lambda f: f.slot, "owners": lambda f: f.owner,
    "attempts": lambda f: f.attempt, "statuses": lambda f: f.status,
    "errors": lambda f: f.error, "history_sizes": lambda f: max(1, f.history_size),
    "history_ttl_ms": lambda f: f.history_ttl_ms, "retain_ms": lambda f: f.retain_runs_ms,
}


class Statements:
    """Builds the statements of a claim or finish batch from the backend's queries."""

    def __init__(self, *, table: str, lock: Query, new: Query, takeover: Query,
                 finish: Query) -> None:
        self._table = table
        self._lock = lock
        self._new = new
        self._takeover = takeover
        self._finish = finish

    def claims(self, requests: Sequence[ClaimRequest]) -> list[Statement]:
        """Generic plans, the lock, then per round the new-slot and the takeover statement
        (if any)."""
        jobs = sorted({r.name for r in requests})
        statements: list[Statement] = [_GENERIC_PLANS,
                                       (self._lock, {"table": self._table, "jobs": jobs})]
        for positions in rounds(requests, lambda r: r.name):
            new = [p for p in positions if requests[p].reason != "takeover"]
            taken = [p for p in positions if requests[p].reason == "takeover"]
            if new:
                statements.append((self._new, _columns(requests, new, _NEW)))
            if taken:
                statements.append((self._takeover, _columns(requests, taken, _TAKEOVER)))
        return statements

    def finishes(self, finishes: Sequence[Finish]) -> list[Statement]:
        """Generic plans, then one finish statement per round."""
        return [_GENERIC_PLANS] + [(self._finish, _columns(finishes, positions, _FINISH))
                                   for positions in rounds(finishes, lambda f: f.name)]


def claim_answers(results: list[list[Row]], count: int) -> list[ClaimResult]:
    """The answers, in request order, from the rows ``(idx, outcome, attempt, now)`` of
    every statement after the plan setting and the lock."""
    answers: list[ClaimResult | None] = [None] * count
    for rows in results[2:]:
        for idx, outcome, attempt, now_ms in rows:
            answers[idx] = ClaimResult(outcome=cast(ClaimOutcome, outcome),
                                       attempt=int(attempt), store_ms=int(now_ms))
    return _complete(answers)


def finish_answers(results: list[list[Row]], count: int) -> list[bool]:
    """The answers, in finish order, from the rows ``(idx, recorded)`` of every statement
    after the plan setting."""
    answers: list[bool | None] = [None] * count
    for rows in results[1:]:
        for idx, recorded in rows:
            answers[idx] = bool(recorded)
    return _complete(answers)


def _complete(answers: list[Any]) -> list[Any]:
    missing = sum(a is None for a in answers)
    if missing:
        raise StoreError(f"PostgreSQL answered {len(answers) - missing} of "
                         f"{len(answers)} item(s) of a batch")
    return answers


async def with_retries(send: Callable[[], Awaitable[T]], idempotent: bool = False) -> T:
    """``send()`` again after a deadlock or serialisation failure (everything was rolled
    back), at most a few times, and after a dropped connection (``dropped()``) on a new
    one, at most ``DROPPED_RETRIES`` times; other errors propagate."""
    drops = 0
    for attempt in range(_RETRIES):
        try:
            return await send()
        except StoreError as exc:
            cause = exc.__cause__
            if dropped(cause, idempotent) and drops < DROPPED_RETRIES:
                drops += 1
                continue
            retriable = isinstance(cause, (pg_errors.DeadlockDetected,
                                           pg_errors.SerializationFailure))
            if not retriable or attempt == _RETRIES - 1:
                raise
    raise AssertionError("unreachable")  # pragma: no cover


def dropped(cause: BaseException | None, idempotent: bool) -> bool:
    """Whether a call that failed with ``cause`` lost its connection without a doubt
    that it changed nothing: the server terminated the session
    (``pg_terminate_backend``, 57P01: its transaction was rolled back, or had not begun)
    or the connection was closed before the call was sent. An idempotent call (a read,
    a lease renewal, a registration) may be sent again after any lost connection. A
    pool that gives no connection is no dropped connection (the server may be down)."""
    if cause is None or isinstance(cause, psycopg_pool.PoolTimeout):
        return False
    if isinstance(cause, pg_errors.AdminShutdown):
        return True
    if not isinstance(cause, psycopg.OperationalError):
        return False
    return idempotent or "the connection is closed" in str(cause)


__all__ = ["DROPPED_RETRIES", "Statements", "claim_answers", "dropped", "finish_answers",
           "with_retries"]
