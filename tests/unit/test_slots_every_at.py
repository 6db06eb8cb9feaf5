"""EverySchedule, AtSchedule, parse_at and load_timezone (docs/contract.md:
*Time and slots*, *Precise behaviour*)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest

from anarchon.schedules.kinds import (
    AtSchedule,
    EverySchedule,
    datetime_to_ms,
    load_timezone,
    ms_to_datetime,
    parse_at,
)

UTC = timezone.utc
T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z, a multiple of every interval used here


def _slots(schedule: EverySchedule | AtSchedule, after: int, count: int) -> list[int]:
    out: list[int] = []
    while len(out) < count:
        slot = schedule.next_after(after)
        if slot is None:
            break
        out.append(slot)
        after = slot
    return out


# -- every: the UTC epoch grid ------------------------------------------------------------------

@pytest.mark.parametrize(
    ("interval", "offset", "after", "expected"),
    [
        (10_000, 0, T0, [T0 + 10_000, T0 + 20_000, T0 + 30_000]),
        (10_000, 0, T0 - 1, [T0, T0 + 10_000, T0 + 20_000]),
        (10_000, 0, T0 + 1, [T0 + 10_000, T0 + 20_000, T0 + 30_000]),
        (10_000, 0, T0 + 9_999, [T0 + 10_000, T0 + 20_000, T0 + 30_000]),
        (10_000, 3_000, T0, [T0 + 3_000, T0 + 13_000, T0 + 23_000]),
        (10_000, 3_000, T0 + 3_000, [T0 + 13_000, T0 + 23_000, T0 + 33_000]),
        (10_000, 13_000, T0, [T0 + 3_000, T0 + 13_000, T0 + 23_000]),  # offset wraps
        (10_000, -7_000, T0, [T0 + 3_000, T0 + 13_000, T0 + 23_000]),  # negative wraps
        (3_600_000, 0, T0 + 1_800_000, [T0 + 3_600_000, T0 + 7_200_000, T0 + 10_800_000]),
        (2_100_000, 0, T0 + 1, [T0 + 2_100_000, T0 + 4_200_000, T0 + 6_300_000]),  # 35 m
        (11_000, 0, T0, [T0 + 3_000, T0 + 14_000, T0 + 25_000]),  # T0 % 11 s == 8 s: epoch grid
        (500, 0, T0 + 250, [T0 + 500, T0 + 1000, T0 + 1500]),
        (86_400_000, 0, T0 + 1, [T0 + 86_400_000, T0 + 172_800_000, T0 + 259_200_000]),
        (10_000, 0, 0, [10_000, 20_000, 30_000]),
        (10_000, 0, -1, [0, 10_000, 20_000]),
    ],
)
def test_every_grid(interval: int, offset: int, after: int, expected: list[int]) -> None:
    assert _slots(EverySchedule(interval, offset), after, 3) == expected


@pytest.mark.parametrize(("interval", "offset"), [(10_000, 0), (7_000, 0), (2_100_000, 60_000),
                                                  (60_000, 1_234)])
def test_every_slots_identical_whatever_the_start(interval: int, offset: int) -> None:
    schedule = EverySchedule(interval, offset)
    reference = _slots(schedule, T0 - 10 * interval, 40)
    for start in range(T0 - 3 * interval, T0 + 3 * interval, interval // 7 or 1):
        upcoming = _slots(schedule, start, 5)
        assert upcoming == [s for s in reference if s > start][:5], start
        assert all(s > start for s in upcoming)
        assert all((s - offset) % interval == 0 for s in upcoming)


@pytest.mark.parametrize("interval", [0, -1, -10_000])
def test_every_refuses_non_positive_interval(interval: int) -> None:
    with pytest.raises(ValueError, match="interval"):
        EverySchedule(interval)


@pytest.mark.parametrize(
    ("offset", "now", "window", "expected"),
    [
        (0, T0, 60_000, T0),  # a slot exactly now counts
        (0, T0 + 1, 60_000, T0),
        (0, T0 + 9_999, 60_000, T0),
        (0, T0 + 9_999, 9_999, None),  # window (now - w, now] excludes T0
        (0, T0 + 9_999, 10_000, T0),
        (0, T0 + 5_000, 0, None),
        (3_000, T0 + 2_999, 60_000, T0 - 7_000),
        (3_000, T0 + 3_000, 1, T0 + 3_000),
    ],
)
def test_every_latest_at_or_before(offset: int, now: int, window: int,
                                   expected: int | None) -> None:
    assert EverySchedule(10_000, offset).latest_at_or_before(now, window) == expected


@pytest.mark.parametrize("now", range(T0 - 25_000, T0 + 25_000, 1_250))
@pytest.mark.parametrize("window", [1, 5_000, 10_000, 30_000])
def test_every_latest_matches_generic_definition(now: int, window: int) -> None:
    schedule = EverySchedule(10_000, 2_500)
    generic = None
    for slot in schedule.slots_between(now - window, now):
        generic = slot
    assert schedule.latest_at_or_before(now, window) == generic


def test_every_describe() -> None:
    assert EverySchedule(10_000).describe() == "every 10s"
    assert "offset 3s" in EverySchedule(10_000, 3_000).describe()
    assert EverySchedule(500).describe() == "every 500ms"


def test_slots_between_is_half_open() -> None:
    schedule = EverySchedule(10_000)
    assert list(schedule.slots_between(T0, T0 + 30_000)) == [T0 + 10_000, T0 + 20_000,
                                                             T0 + 30_000]
    assert list(schedule.slots_between(T0, T0 + 9_999)) == []


# -- at -----------------------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("after", "expected"),
    [(T0 - 1, T0), (T0 - 86_400_000, T0), (T0, None), (T0 + 1, None)],
)
def test_at_schedule(after: int, expected: int | None) -> None:
    assert AtSchedule(T0).next_after(after) == expected


def test_at_schedule_runs_once_and_describes() -> None:
    schedule = AtSchedule(T0)
    assert list(schedule.slots_between(0, T0 * 2)) == [T0]
    assert schedule.latest_at_or_before(T0 + 5, 10) == T0
    assert schedule.latest_at_or_before(T0 + 5, 5) is None
    assert "2026-01-01T00:00:00+00:00" in schedule.describe()


@pytest.mark.parametrize(
    ("when", "expected"),
    [
        (datetime(2026, 12, 24, 18, 0, tzinfo=UTC), 1_798_135_200_000),
        (datetime(2026, 12, 24, 19, 0, tzinfo=ZoneInfo("Europe/Berlin")), 1_798_135_200_000),
        (datetime(2026, 12, 24, 20, 0, tzinfo=timezone(timedelta(hours=2))), 1_798_135_200_000),
        ("2026-12-24T18:00:00Z", 1_798_135_200_000),
        ("2026-12-24T18:00:00z", 1_798_135_200_000),
        ("2026-12-24T18:00Z", 1_798_135_200_000),
        ("2026-12-24T18:00:00+00:00", 1_798_135_200_000),
        ("2026-12-24T20:00:00+02:00", 1_798_135_200_000),
        ("2026-12-24T13:00:00-05:00", 1_798_135_200_000),
        ("2026-12-24T18:00:00.250Z", 1_798_135_200_250),
        ("  2026-12-24T18:00:00Z  ", 1_798_135_200_000),
        (1_798_135_200, 1_798_135_200_000),
        (1_798_135_200.5, 1_798_135_200_500),
        (0, 0),
    ],
)
def test_parse_at_accepts(when: object, expected: int) -> None:
    assert parse_at(when, job="launch") == expected


@pytest.mark.parametrize(
    "when",
    [datetime(2026, 12, 24, 18, 0), "2026-12-24T18:00:00", "2026-12-24", "2026-12-24 18:00"],
    ids=repr,
)
def test_parse_at_refuses_naive(when: object) -> None:
    with pytest.raises(ValueError, match="launch") as info:
        parse_at(when, job="launch")
    assert "naive" in str(info.value)


@pytest.mark.parametrize("when", ["tomorrow", "", "2026-13-01T00:00:00Z", "12/24/2026"])
def test_parse_at_refuses_unreadable_strings(when: str) -> None:
    with pytest.raises(ValueError, match="launch") as info:
        parse_at(when, job="launch")
    assert repr(when) in str(info.value)


@pytest.mark.parametrize("when", [None, True, [1], {"at": 1}], ids=repr)
def test_parse_at_wrong_types(when: object) -> None:
    with pytest.raises(TypeError, match="launch"):
        parse_at(when, job="launch")


@pytest.mark.parametrize("when", [float("inf"), float("-inf"), float("nan")], ids=repr)
def test_parse_at_refuses_non_finite_epoch(when: float) -> None:
    with pytest.raises(ValueError, match="launch"):
        parse_at(when, job="launch")


# -- conversions and timezones ------------------------------------------------------------------

@pytest.mark.parametrize("ms", [0, 1, 999, T0, T0 + 123, 1_798_135_200_250])
def test_ms_datetime_round_trip(ms: int) -> None:
    value = ms_to_datetime(ms)
    assert value.tzinfo is UTC
    assert datetime_to_ms(value) == ms


@pytest.mark.parametrize("name", ["UTC", "Europe/Berlin", "America/New_York", "Asia/Kolkata"])
def test_load_timezone(name: str) -> None:
    assert load_timezone(name).key == name


def test_load_timezone_passes_zoneinfo_through() -> None:
    zone = ZoneInfo("Europe/Berlin")
    assert load_timezone(zone) is zone


@pytest.mark.parametrize("name", ["Nowhere/City", "", "Europe/Nowhere", "../etc/passwd", "UTC "])
def test_load_timezone_unknown_is_value_error(name: str) -> None:
    with pytest.raises(ValueError, match="timezone") as info:
        load_timezone(name, job="digest")
    assert not isinstance(info.value, KeyError)
    assert repr(name) in str(info.value)
    assert "digest" in str(info.value)


@pytest.mark.parametrize("name", [5, None, b"UTC"], ids=repr)
def test_load_timezone_wrong_type(name: object) -> None:
    with pytest.raises(TypeError, match="timezone"):
        load_timezone(name)
