"""The pure claim ladder shared by SQLite and the Django store (``claim_rules``): each
refusal in its order, without a store."""

from __future__ import annotations

from typing import Any

from anarchon.backends.base import EARLY_TOLERANCE_MS, ClaimRequest
from anarchon.backends.claim_rules import exhausted, refusal, takeover_open

NOW = 1_000_000


def req(**overrides: Any) -> ClaimRequest:
    fields: dict[str, Any] = dict(name="job", slot=NOW, owner="a", reason="scheduled",
                                  lease_ms=1000, max_late_ms=5000, max_attempts=3,
                                  overlap="skip", catch_up_ms=60_000)
    fields.update(overrides)
    return ClaimRequest(**fields)


def test_the_ladder_refuses_in_order() -> None:
    early = req(slot=NOW + EARLY_TOLERANCE_MS + 1, version=0)
    assert refusal(early, None, 5, NOW) == "early"  # before stale
    assert refusal(req(slot=NOW + EARLY_TOLERANCE_MS), None, 0, NOW) is None
    assert refusal(req(slot=NOW - 10_000, version=1), None, 2, NOW) == "stale"  # before late
    assert refusal(req(slot=NOW - 10_000, version=2), None, 2, NOW) == "late"
    assert refusal(req(slot=NOW - 5000), None, 0, NOW) is None


def test_catch_up_needs_the_job_known_before_its_slot_unless_one_off() -> None:
    catch_up = req(reason="catch-up", slot=NOW - 30_000)
    assert refusal(catch_up, None, 0, NOW) == "late"
    assert refusal(catch_up, NOW - 30_000, 0, NOW) == "late"
    assert refusal(catch_up, NOW - 30_001, 0, NOW) is None
    assert refusal(req(reason="catch-up", slot=NOW - 30_000, one_off=True), NOW, 0, NOW) is None
    assert refusal(req(reason="catch-up", slot=NOW - 60_000), 0, 0, NOW) == "late"


def test_takeover_needs_the_expected_attempt_with_an_expired_lease() -> None:
    take = req(reason="takeover", expected_attempt=2)
    assert takeover_open(take, True, 2, NOW, NOW)
    assert not takeover_open(take, True, 2, NOW + 1, NOW)
    assert not takeover_open(take, True, 1, NOW, NOW)
    assert not takeover_open(take, False, 2, NOW, NOW)
    assert exhausted(take, 3, False) and not exhausted(take, 3, True)
    assert not exhausted(take, 2, False)
