"""CronSchedule: 5 and 6 fields, timezones and the DST rules of docs/contract.md
(*Time and slots*).

Transitions used (2026):
* America/New_York: 03-08 02:00 EST -> 03:00 EDT (gap 02:00-03:00, 07:00Z),
  11-01 02:00 EDT -> 01:00 EST (01:00-02:00 repeated: 05:00Z-06:00Z EDT, 06:00Z-07:00Z EST).
* Europe/Berlin: 03-29 02:00 CET -> 03:00 CEST (gap 02:00-03:00, 01:00Z),
  10-25 03:00 CEST -> 02:00 CET (02:00-03:00 repeated: 00:00Z-01:00Z CEST, 01:00Z-02:00Z CET).
"""

from __future__ import annotations

from datetime import date, datetime, timezone
from zoneinfo import ZoneInfo

import pytest

from anarchon.schedules.kinds import CronSchedule, datetime_to_ms, ms_to_datetime

UTC = timezone.utc
NY = "America/New_York"
BERLIN = "Europe/Berlin"


def _ms(text: str) -> int:
    return datetime_to_ms(datetime.fromisoformat(text.replace("Z", "+00:00")))


def _iso(ms: int) -> str:
    return ms_to_datetime(ms).strftime("%Y-%m-%dT%H:%MZ")


def _iso_s(ms: int) -> str:
    return ms_to_datetime(ms).strftime("%Y-%m-%dT%H:%M:%SZ")


def _next(schedule: CronSchedule, after: int, count: int) -> list[int]:
    out: list[int] = []
    while len(out) < count:
        slot = schedule.next_after(after)
        assert slot is not None
        assert slot > after
        out.append(slot)
        after = slot
    return out


# (id, expression, timezone, after, expected slots in UTC)
DST_CASES = [
    # --- New York, spring forward: a fixed hour in the gap runs at the shifted time ---------
    ("ny-gap-0230", "30 2 * * *", NY, "2026-03-07T00:00Z",
     ["2026-03-07T07:30Z", "2026-03-08T07:30Z", "2026-03-09T06:30Z"]),
    ("ny-gap-0200", "0 2 * * *", NY, "2026-03-07T00:00Z",
     ["2026-03-07T07:00Z", "2026-03-08T07:00Z", "2026-03-09T06:00Z"]),
    ("ny-gap-0215-6f", "0 15 2 * * *", NY, "2026-03-07T00:00Z",
     ["2026-03-07T07:15Z", "2026-03-08T07:15Z", "2026-03-09T06:15Z"]),
    ("ny-gap-unaffected-0130", "30 1 * * *", NY, "2026-03-07T00:00Z",
     ["2026-03-07T06:30Z", "2026-03-08T06:30Z", "2026-03-09T05:30Z"]),
    ("ny-gap-unaffected-0330", "30 3 * * *", NY, "2026-03-07T00:00Z",
     ["2026-03-07T08:30Z", "2026-03-08T07:30Z", "2026-03-09T07:30Z"]),
    ("ny-gap-hourly", "0 * * * *", NY, "2026-03-08T04:30Z",
     ["2026-03-08T05:00Z", "2026-03-08T06:00Z", "2026-03-08T07:00Z", "2026-03-08T08:00Z",
      "2026-03-08T09:00Z"]),
    ("ny-gap-half-hourly", "*/30 * * * *", NY, "2026-03-08T05:00Z",
     ["2026-03-08T05:30Z", "2026-03-08T06:00Z", "2026-03-08T06:30Z", "2026-03-08T07:00Z",
      "2026-03-08T07:30Z", "2026-03-08T08:00Z"]),
    # --- New York, fall back: a fixed hour in the repeated hour runs at its first occurrence --
    ("ny-repeat-0130", "30 1 * * *", NY, "2026-10-31T00:00Z",
     ["2026-10-31T05:30Z", "2026-11-01T05:30Z", "2026-11-02T06:30Z"]),
    ("ny-repeat-0100", "0 1 * * *", NY, "2026-10-31T00:00Z",
     ["2026-10-31T05:00Z", "2026-11-01T05:00Z", "2026-11-02T06:00Z"]),
    ("ny-repeat-0230", "30 2 * * *", NY, "2026-10-31T00:00Z",
     ["2026-10-31T06:30Z", "2026-11-01T07:30Z", "2026-11-02T07:30Z"]),
    ("ny-repeat-fixed-hour-stepped-minutes", "*/20 1 * * *", NY, "2026-11-01T04:00Z",
     ["2026-11-01T05:00Z", "2026-11-01T05:20Z", "2026-11-01T05:40Z", "2026-11-02T06:00Z"]),
    ("ny-repeat-hourly", "0 * * * *", NY, "2026-11-01T03:30Z",
     ["2026-11-01T04:00Z", "2026-11-01T05:00Z", "2026-11-01T06:00Z", "2026-11-01T07:00Z",
      "2026-11-01T08:00Z"]),
    ("ny-repeat-half-hourly", "*/30 * * * *", NY, "2026-11-01T04:15Z",
     ["2026-11-01T04:30Z", "2026-11-01T05:00Z", "2026-11-01T05:30Z", "2026-11-01T06:00Z",
      "2026-11-01T06:30Z", "2026-11-01T07:00Z", "2026-11-01T07:30Z"]),
    ("ny-repeat-hourly-6f", "0 0 * * * *", NY, "2026-11-01T04:30Z",
     ["2026-11-01T05:00Z", "2026-11-01T06:00Z", "2026-11-01T07:00Z"]),
    # --- Berlin, spring forward ------------------------------------------------------------
    ("berlin-gap-0230", "30 2 * * *", BERLIN, "2026-03-28T00:00Z",
     ["2026-03-28T01:30Z", "2026-03-29T01:30Z", "2026-03-30T00:30Z"]),
    ("berlin-gap-0200-6f", "0 0 2 * * *", BERLIN, "2026-03-28T00:00Z",
     ["2026-03-28T01:00Z", "2026-03-29T01:00Z", "2026-03-30T00:00Z"]),
    ("berlin-gap-0259", "59 2 * * *", BERLIN, "2026-03-28T00:00Z",
     ["2026-03-28T01:59Z", "2026-03-29T01:59Z", "2026-03-30T00:59Z"]),
    ("berlin-gap-hourly", "0 * * * *", BERLIN, "2026-03-28T22:30Z",
     ["2026-03-28T23:00Z", "2026-03-29T00:00Z", "2026-03-29T01:00Z", "2026-03-29T02:00Z"]),
    ("berlin-gap-half-hourly", "*/30 * * * *", BERLIN, "2026-03-28T23:45Z",
     ["2026-03-29T00:00Z", "2026-03-29T00:30Z", "2026-03-29T01:00Z", "2026-03-29T01:30Z",
      "2026-03-29T02:00Z"]),
    # --- Berlin, fall back -----------------------------------------------------------------
    ("berlin-repeat-0230", "30 2 * * *", BERLIN, "2026-10-24T00:00Z",
     ["2026-10-24T00:30Z", "2026-10-25T00:30Z", "2026-10-26T01:30Z"]),
    ("berlin-repeat-0200", "0 2 * * *", BERLIN, "2026-10-23T12:00Z",
     ["2026-10-24T00:00Z", "2026-10-25T00:00Z", "2026-10-26T01:00Z"]),
    ("berlin-repeat-hourly", "0 * * * *", BERLIN, "2026-10-24T22:30Z",
     ["2026-10-24T23:00Z", "2026-10-25T00:00Z", "2026-10-25T01:00Z", "2026-10-25T02:00Z",
      "2026-10-25T03:00Z"]),
    ("berlin-repeat-stepped-hours", "0 */2 * * *", BERLIN, "2026-10-24T21:00Z",
     ["2026-10-24T22:00Z", "2026-10-25T00:00Z", "2026-10-25T01:00Z", "2026-10-25T03:00Z"]),
    ("berlin-repeat-half-hourly", "*/30 * * * *", BERLIN, "2026-10-24T22:45Z",
     ["2026-10-24T23:00Z", "2026-10-24T23:30Z", "2026-10-25T00:00Z", "2026-10-25T00:30Z",
      "2026-10-25T01:00Z", "2026-10-25T01:30Z", "2026-10-25T02:00Z"]),
]


@pytest.mark.parametrize(("expr", "tz", "after", "expected"),
                         [case[1:] for case in DST_CASES], ids=[case[0] for case in DST_CASES])
def test_dst_tables(expr: str, tz: str, after: str, expected: list[str]) -> None:
    schedule = CronSchedule(expr, ZoneInfo(tz))
    assert [_iso(s) for s in _next(schedule, _ms(after), len(expected))] == expected


@pytest.mark.parametrize(("expr", "tz", "after", "expected"),
                         [case[1:] for case in DST_CASES], ids=[case[0] for case in DST_CASES])
def test_dst_next_after_from_any_start(expr: str, tz: str, after: str,
                                       expected: list[str]) -> None:
    """Whatever instant an instance starts at, it computes the same next slot (strictly after)."""
    schedule = CronSchedule(expr, ZoneInfo(tz))
    slots = [_ms(s) for s in expected]
    starts = set(range(_ms(after), slots[-1], 15 * 60_000))
    starts |= {s + d for s in slots[:-1] for d in (-1, 0, 1)}
    for start in sorted(starts):
        want = min(s for s in slots if s > start)
        assert schedule.next_after(start) == want, _iso_s(start)


@pytest.mark.parametrize(
    ("expr", "tz", "day"),
    [
        ("30 2 * * *", NY, date(2026, 3, 8)),
        ("30 1 * * *", NY, date(2026, 11, 1)),
        ("0 1 * * *", NY, date(2026, 11, 1)),
        ("0 2 * * *", NY, date(2026, 3, 8)),
        ("30 2 * * *", BERLIN, date(2026, 3, 29)),
        ("30 2 * * *", BERLIN, date(2026, 10, 25)),
        ("0 2 * * *", BERLIN, date(2026, 10, 25)),
        ("0 0 2 * * *", BERLIN, date(2026, 10, 25)),
    ],
)
def test_fixed_hour_runs_exactly_once_on_a_dst_day(expr: str, tz: str, day: date) -> None:
    zone = ZoneInfo(tz)
    schedule = CronSchedule(expr, zone)
    start = datetime_to_ms(datetime(day.year, day.month, day.day, tzinfo=zone)) - 86_400_000
    slots = list(schedule.slots_between(start, start + 3 * 86_400_000))
    local_days = [ms_to_datetime(s).astimezone(zone).date() for s in slots]
    assert local_days.count(day) == 1
    assert len(slots) == len(set(slots)) == 3


@pytest.mark.parametrize(
    ("expr", "tz", "day", "per_day"),
    [
        ("0 * * * *", NY, date(2026, 3, 8), 23),
        ("0 * * * *", NY, date(2026, 11, 1), 25),
        ("*/30 * * * *", NY, date(2026, 11, 1), 50),
        ("*/30 * * * *", NY, date(2026, 3, 8), 46),
        ("0 * * * *", BERLIN, date(2026, 3, 29), 23),
        ("0 * * * *", BERLIN, date(2026, 10, 25), 25),
        ("*/15 * * * *", BERLIN, date(2026, 10, 25), 100),
        ("0 */2 * * *", BERLIN, date(2026, 10, 25), 13),
        ("0 0 * * * *", BERLIN, date(2026, 10, 25), 25),
    ],
)
def test_wildcard_hours_run_every_real_hour(expr: str, tz: str, day: date,
                                            per_day: int) -> None:
    zone = ZoneInfo(tz)
    schedule = CronSchedule(expr, zone)
    start = datetime_to_ms(datetime(day.year, day.month, day.day, tzinfo=zone)) - 1
    end_day = datetime(day.year, day.month, day.day + 1, tzinfo=zone)
    slots = list(schedule.slots_between(start, datetime_to_ms(end_day) - 1))
    assert len(slots) == len(set(slots)) == per_day  # never twice at one instant
    assert slots == sorted(slots)
    assert all(s % 900_000 == 0 for s in slots)  # on real quarter hours (whole-hour zones)


# -- plain cron behaviour -----------------------------------------------------------------------

@pytest.mark.parametrize(
    ("expr", "tz", "after", "expected"),
    [
        ("*/15 * * * *", "UTC", "2026-01-01T00:07Z",
         ["2026-01-01T00:15Z", "2026-01-01T00:30Z", "2026-01-01T00:45Z"]),
        ("0 9 * * 1", BERLIN, "2026-01-01T00:00Z",  # Mondays 09:00 CET
         ["2026-01-05T08:00Z", "2026-01-12T08:00Z", "2026-01-19T08:00Z"]),
        ("0 9 * * 1", BERLIN, "2026-07-01T00:00Z",  # Mondays 09:00 CEST
         ["2026-07-06T07:00Z", "2026-07-13T07:00Z", "2026-07-20T07:00Z"]),
        ("0 0 1 * *", "Asia/Kolkata", "2026-01-01T00:00Z",
         ["2026-01-31T18:30Z", "2026-02-28T18:30Z", "2026-03-31T18:30Z"]),
        ("0 12 29 2 *", "UTC", "2026-01-01T00:00Z",
         ["2028-02-29T12:00Z", "2032-02-29T12:00Z", "2036-02-29T12:00Z"]),
        ("  0   12 * * *  ", "UTC", "2026-01-01T12:00Z",
         ["2026-01-02T12:00Z", "2026-01-03T12:00Z", "2026-01-04T12:00Z"]),
    ],
)
def test_cron_five_fields(expr: str, tz: str, after: str, expected: list[str]) -> None:
    schedule = CronSchedule(expr, ZoneInfo(tz))
    assert [_iso(s) for s in _next(schedule, _ms(after), len(expected))] == expected


@pytest.mark.parametrize(
    ("expr", "after", "expected"),
    [
        ("*/20 * * * * *", "2026-01-01T00:00:05Z",
         ["2026-01-01T00:00:20Z", "2026-01-01T00:00:40Z", "2026-01-01T00:01:00Z"]),
        ("30 0 12 * * *", "2026-01-01T00:00:00Z",
         ["2026-01-01T12:00:30Z", "2026-01-02T12:00:30Z", "2026-01-03T12:00:30Z"]),
        ("0 */5 * * * *", "2026-01-01T00:00:00Z",
         ["2026-01-01T00:05:00Z", "2026-01-01T00:10:00Z", "2026-01-01T00:15:00Z"]),
    ],
)
def test_cron_six_fields_seconds_first(expr: str, after: str, expected: list[str]) -> None:
    schedule = CronSchedule(expr, ZoneInfo("UTC"))
    assert [_iso_s(s) for s in _next(schedule, _ms(after), len(expected))] == expected


def test_cron_next_after_is_strictly_after_a_slot() -> None:
    schedule = CronSchedule("0 * * * *", ZoneInfo("UTC"))
    slot = _ms("2026-01-01T05:00Z")
    assert schedule.next_after(slot) == slot + 3_600_000
    assert schedule.next_after(slot - 1) == slot


def test_cron_latest_at_or_before() -> None:
    schedule = CronSchedule("*/10 * * * *", ZoneInfo("UTC"))
    now = _ms("2026-01-01T05:07Z")
    assert schedule.latest_at_or_before(now, 10 * 60_000) == _ms("2026-01-01T05:00Z")
    assert schedule.latest_at_or_before(now, 7 * 60_000) is None
    assert schedule.latest_at_or_before(_ms("2026-01-01T05:00Z"), 1) == _ms("2026-01-01T05:00Z")


def test_cron_describe_normalises_spaces() -> None:
    schedule = CronSchedule(" 0  */2 * * * ", ZoneInfo(BERLIN))
    assert schedule.describe() == "cron '0 */2 * * *' (Europe/Berlin)"
    assert schedule.kind == "cron"


@pytest.mark.parametrize(
    "expr",
    ["* * * *", "61 * * * *", "a b c d e", "", "   ", "* * * * * * *", "0 25 * * *",
     "*/0 * * * *", "0 0 * 13 *", "0 0 30 2 *", "60 * * * * *"],
)
def test_invalid_cron_names_the_expression(expr: str) -> None:
    with pytest.raises(ValueError, match="cron") as info:
        CronSchedule(expr, ZoneInfo("UTC"))
    assert repr(expr) in str(info.value)


@pytest.mark.parametrize("expr", [None, 5, ["0", "*", "*", "*", "*"]], ids=repr)
def test_cron_wrong_type(expr: object) -> None:
    with pytest.raises(TypeError):
        CronSchedule(expr, ZoneInfo("UTC"))  # type: ignore[arg-type]


def test_every_cron_slot_is_a_whole_millisecond_utc_instant() -> None:
    schedule = CronSchedule("*/7 * * * *", ZoneInfo(NY))
    for slot in _next(schedule, _ms("2026-11-01T04:00Z"), 30):
        assert isinstance(slot, int)
        assert ms_to_datetime(slot).tzinfo is UTC
