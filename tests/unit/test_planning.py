"""The plan: every job's next due entry, earliest first; removed jobs never come due."""

from __future__ import annotations

from anarchon.engine.plan import Due, Plan


def due(at: float, name: str, slot: int = 0, following: int | None = None) -> Due:
    return Due(at, name, slot, following)


def test_entries_come_due_earliest_first_and_only_once_due() -> None:
    plan = Plan()
    assert plan.next_at() is None and plan.pop_due(10**12) == []
    assert plan.put(due(300, "c")) is True  # the only entry is the earliest
    assert plan.put(due(100, "a")) is True
    assert plan.put(due(200, "b")) is False
    assert plan.next_at() == 100 and len(plan) == 3
    assert plan.pop_due(99) == []
    assert [d.name for d in plan.pop_due(200)] == ["a", "b"]
    assert plan.next_at() == 300
    assert plan.follow(due(150, "a")) is True  # a's next entry
    assert [d.name for d in plan.pop_due(1000)] == ["a", "c"]


def test_ties_keep_the_order_they_were_planned_in() -> None:
    plan = Plan()
    for name in ("x", "y", "z"):
        plan.put(due(5, name))
    assert [d.name for d in plan.pop_due(5)] == ["x", "y", "z"]


def test_put_replaces_the_jobs_entry_and_remove_forgets_it() -> None:
    plan = Plan()
    plan.put(due(100, "a", slot=1))
    plan.put(due(500, "a", slot=2))  # replaces slot 1
    plan.put(due(200, "b"))
    assert plan.next_at() == 200
    plan.remove("b")
    assert plan.next_at() == 500 and len(plan) == 1  # b's stale entry is skipped
    assert plan.follow(due(50, "b")) is False  # a removed job is not planned again
    assert [(d.name, d.slot) for d in plan.pop_due(1000)] == [("a", 2)]


def test_a_job_removed_and_added_again_gets_no_stale_entry_back() -> None:
    plan = Plan()
    plan.put(due(100, "a", slot=1))
    plan.remove("a")
    plan.put(due(300, "a", slot=3))
    assert [(d.name, d.slot) for d in plan.pop_due(1000)] == [("a", 3)]
