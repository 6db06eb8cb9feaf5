"""parse_duration: every accepted form and every refused one (docs/contract.md:
*Durations and names*, *Precise behaviour*)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from anarchon.durations import parse_duration, to_ms


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("500ms", 0.5),
        ("10s", 10.0),
        ("35m", 2100.0),
        ("1h30m", 5400.0),
        ("2d", 172800.0),
        ("1w", 604800.0),
        ("1h30m15s", 5415.0),
        ("1.5h", 5400.0),
        ("1m500ms", 60.5),
        ("10S", 10.0),
        (" 10s ", 10.0),
        ("1h 30m", 5400.0),
        ("0s", 0.0),
        ("10", 10.0),
        ("2.5", 2.5),
        ("0", 0.0),
        (0, 0.0),
        (7, 7.0),
        (0.25, 0.25),
        (timedelta(minutes=2), 120.0),
        (timedelta(milliseconds=1500), 1.5),
        (timedelta(0), 0.0),
    ],
)
def test_accepted(value: object, seconds: float) -> None:
    result = parse_duration(value, option="jitter")
    assert result == pytest.approx(seconds)
    assert isinstance(result, float)


@pytest.mark.parametrize(
    "value",
    ["", "   ", "10x", "-5s", "1h-2m", "abc", "s", "10 s x", "h1", "1..5s", "inf", "nan",
     float("nan"), float("inf"), float("-inf"), -1, -0.5, timedelta(seconds=-1)],
    ids=repr,
)
def test_bad_values_raise_value_error_naming_option_and_value(value: object) -> None:
    with pytest.raises(ValueError, match="max_late") as info:
        parse_duration(value, option="max_late")
    assert repr(value) in str(info.value)


@pytest.mark.parametrize("value", [None, [1], {"s": 1}, object(), b"10s"],
                         ids=["None", "list", "dict", "object", "bytes"])
def test_wrong_types_raise_type_error_naming_option_and_value(value: object) -> None:
    with pytest.raises(TypeError, match="heartbeat") as info:
        parse_duration(value, option="heartbeat")
    message = str(info.value)
    assert type(value).__name__ in message
    assert repr(value) in message


@pytest.mark.parametrize("value", [True, False])
def test_bool_is_a_type_error(value: bool) -> None:
    with pytest.raises(TypeError, match="lease") as info:
        parse_duration(value, option="lease")
    assert "bool" in str(info.value)


def test_default_option_name_in_message() -> None:
    with pytest.raises(ValueError, match="duration"):
        parse_duration("nope")


@pytest.mark.parametrize(
    ("seconds", "ms"), [(0.0, 0), (1.0, 1000), (0.5, 500), (0.0004, 0), (0.0006, 1), (2.5, 2500)]
)
def test_to_ms(seconds: float, ms: int) -> None:
    assert to_ms(seconds) == ms
