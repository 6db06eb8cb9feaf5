"""How a SQL store cuts a batch (pure logic): rounds, validation, PostgreSQL statements."""

from __future__ import annotations

from typing import Any

import pytest
from psycopg import sql

from anarchon.backends.base import ClaimReason, ClaimRequest, Finish
from anarchon.backends.batches import check_claims, check_finishes, rounds
from anarchon.backends.postgres.claims import Statements


def req(job: str, reason: ClaimReason = "scheduled", **changes: Any) -> ClaimRequest:
    fields: dict[str, Any] = dict(name=job, slot=1000, owner="A", reason=reason,
                                  lease_ms=1000, max_late_ms=100, max_attempts=3,
                                  overlap="skip", expected_attempt=1)
    fields.update(changes)
    return ClaimRequest(**fields)


def test_rounds_hold_each_job_once_in_list_order() -> None:
    assert rounds(["a", "b", "a", "c", "a", "b"], str) == [[0, 1, 3], [2, 5], [4]]
    assert rounds([], str) == []


def test_a_planner_step_is_the_lock_and_one_statement() -> None:
    statements = Statements(table="t", lock=sql.SQL("lock"), new=sql.SQL("new"),
                            takeover=sql.SQL("takeover"), finish=sql.SQL("finish"))
    batch = [req(f"job-{i}") for i in range(500)]
    [plans, lock, new] = statements.claims(batch)
    # each transaction first asks for generic plans (no re-planning per batch size)
    assert "plan_cache_mode" in plans[0].as_string(None)
    assert new[0] == sql.SQL("new") and new[1]["idx"] == list(range(500))
    assert lock[1]["jobs"] == sorted({r.name for r in batch})
    # the version fence travels in the same statement (no extra round trip)
    assert statements.claims([req("v", version=3)])[2][1]["versions"] == [3]
    # a takeover and a second request for one job go in their own statements, in order
    mixed = statements.claims([req("a"), req("b", "takeover"), req("a")])
    assert [(q, p["idx"]) for q, p in mixed[2:]] == [
        (sql.SQL("new"), [0]), (sql.SQL("takeover"), [1]), (sql.SQL("new"), [2])]


@pytest.mark.parametrize(("changes", "message"), [
    ({"lease_ms": 0}, "lease_ms must be positive"),
    ({"reason": "later"}, "claim reason must be one of"),
    ({"overlap": "maybe"}, "overlap must be 'skip' or 'allow'"),
    ({"max_late_ms": -1}, "max_late_ms must be at least 0"),
    ({"slot": "1000"}, "slot must be an int"),
    ({"name": " x"}, "invalid job name"),
])
def test_a_bad_claim_is_named(changes: dict[str, Any], message: str) -> None:
    with pytest.raises((ValueError, TypeError), match=message):
        check_claims([req("fine"), req("x", **changes)])


def test_a_bad_finish_is_named() -> None:
    finish = Finish(name="a", slot=1, owner="A", attempt=1, status="bogus",  # type: ignore[arg-type]
                    error=None, history_size=10, history_ttl_ms=None, retain_runs_ms=0)
    with pytest.raises(ValueError, match="finish status must be one of"):
        check_finishes([finish])
