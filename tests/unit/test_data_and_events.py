"""merge_data (run data) and event listeners (docs/contract.md: *Registering jobs*,
*History and events*, *Precise behaviour*)."""

from __future__ import annotations

import logging
from typing import Any

import pytest

import anarchon
from anarchon.events import EVENT_TYPES, Event, Listeners
from anarchon.jobs.definition import NO_DATA, merge_data

# -- merge_data ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("levels", "expected"),
    [
        ([], None),
        ([NO_DATA, NO_DATA, NO_DATA], None),
        ([{"a": 1}], {"a": 1}),
        ([{"a": 1, "b": 1}, {"b": 2}], {"a": 1, "b": 2}),
        ([{"a": 1}, {"b": 2}, {"a": 3, "c": 3}], {"a": 3, "b": 2, "c": 3}),
        ([{"a": 1}, NO_DATA, {"b": 2}], {"a": 1, "b": 2}),
        ([{"a": 1}, NO_DATA], {"a": 1}),
        ([NO_DATA, {"a": 1}], {"a": 1}),
        ([{"a": 1}, 5], 5),
        ([5, {"a": 1}], {"a": 1}),
        ([{"a": 1}, "token"], "token"),
        ([{"a": 1}, [1, 2]], [1, 2]),
        ([[1], [2]], [2]),  # lists replace, they do not concatenate
        ([{"a": {"x": 1}}, {"a": {"y": 2}}], {"a": {"y": 2}}),  # shallow merge
        ([None, {"a": 1}], {"a": 1}),
        ([{"a": 1}, {}], {"a": 1}),
        ([lambda: {"a": 1}, {"b": 2}], {"a": 1, "b": 2}),
        ([{"a": 1, "b": 1}, lambda: {"b": 2}], {"a": 1, "b": 2}),
        ([{"a": 1}, lambda: 7], 7),
        ([lambda: {"a": 1}, lambda: {"a": 2}, {"c": 3}], {"a": 2, "c": 3}),
    ],
)
def test_merge_data(levels: list[Any], expected: Any) -> None:
    assert merge_data(levels) == expected


def test_merge_data_does_not_mutate_levels() -> None:
    scheduler, job, run = {"a": 1}, {"b": 2}, {"a": 3}
    merged = merge_data([scheduler, job, run])
    assert merged == {"a": 3, "b": 2}
    assert scheduler == {"a": 1} and job == {"b": 2} and run == {"a": 3}
    assert merged is not scheduler and merged is not job and merged is not run


def test_merge_data_calls_callables_each_time() -> None:
    calls: list[int] = []

    def fresh() -> dict[str, int]:
        calls.append(1)
        return {"n": len(calls)}

    assert merge_data([fresh]) == {"n": 1}
    assert merge_data([fresh]) == {"n": 2}


def test_merge_data_keeps_non_callable_objects_as_they_are() -> None:
    client = object()
    assert merge_data([{"client": client}])["client"] is client
    assert merge_data([client]) is client


def test_merge_data_propagates_a_raising_callable() -> None:
    def broken() -> dict[str, int]:
        raise RuntimeError("vault unreachable")

    with pytest.raises(RuntimeError, match="vault"):
        merge_data([{"a": 1}, broken])


# -- listeners ----------------------------------------------------------------------------------

def _event(type_: Any = "start", **kwargs: Any) -> Event:
    fields: dict[str, Any] = {"name": "job", "slot": 1000, "attempt": 1, "reason": "scheduled",
                              "instance_id": "me"}
    fields.update(kwargs)
    return Event(type_, **fields)


def test_event_types() -> None:
    expected = {"start", "success", "failure", "interrupted", "skip", "lost", "error",
                "change"}
    assert expected == EVENT_TYPES


@pytest.mark.parametrize("name", ["started", "", "SUCCESS", "finish", "retry"])
def test_unknown_event_name_is_a_value_error(name: str) -> None:
    with pytest.raises(ValueError, match=repr(name)):
        Listeners().add(name, lambda event: None)


def test_non_callable_listener_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="start"):
        Listeners().add("start", "print")  # type: ignore[arg-type]


@pytest.mark.parametrize("type_", sorted(EVENT_TYPES))
def test_listeners_receive_only_their_type(type_: str) -> None:
    listeners = Listeners()
    received: dict[str, list[Event]] = {t: [] for t in EVENT_TYPES}
    for t in EVENT_TYPES:
        listeners.add(t, received[t].append)
    event = _event(type_)
    listeners.emit(event)
    assert received[type_] == [event]
    assert all(not got for t, got in received.items() if t != type_)


def test_a_raising_listener_is_logged_and_does_not_propagate(
        caplog: pytest.LogCaptureFixture) -> None:
    listeners = Listeners()
    after: list[Event] = []

    def broken(event: Event) -> None:
        raise RuntimeError("listener exploded")

    listeners.add("success", broken)
    listeners.add("success", after.append)
    event = _event("success")
    with caplog.at_level(logging.ERROR, logger="anarchon"):
        listeners.emit(event)  # must not raise
    assert after == [event]  # later listeners still run
    records = [r for r in caplog.records if r.name == "anarchon"]
    assert len(records) == 1
    assert records[0].levelno == logging.ERROR
    assert records[0].exc_info is not None
    assert "listener exploded" in caplog.text


def test_listeners_never_log_error_events(caplog: pytest.LogCaptureFixture) -> None:
    """What is logged of store errors is OutageLog's (tests/unit/test_outage_log.py)."""
    listeners = Listeners()
    got: list[Event] = []
    listeners.add("error", got.append)
    with caplog.at_level(logging.DEBUG, logger="anarchon"):
        listeners.emit(_event("error", error=ConnectionError("store down")))
    assert len(got) == 1
    assert caplog.records == []


def test_event_is_frozen_with_the_documented_fields() -> None:
    event = _event("skip", reason="taken")
    assert (event.type, event.name, event.slot, event.attempt, event.reason, event.instance_id,
            event.error) == ("skip", "job", 1000, 1, "taken", "me", None)
    with pytest.raises(AttributeError):
        event.reason = "late"  # type: ignore[misc]


def test_scheduler_on_validates_and_returns_the_listener(tmp_path: Any) -> None:
    s = anarchon.Scheduler(backend=anarchon.SqliteBackend(str(tmp_path / "x.db")))

    def listener(event: Event) -> None:
        return None

    assert s.on("success", listener) is listener
    with pytest.raises(ValueError, match="succes"):
        s.on("succes", listener)  # type: ignore[arg-type]
