"""CronSchedule's shared answers per (expression, timezone): parsed once, and never an
answer other than the one computed afresh, DST transitions included."""

from __future__ import annotations

import random
from datetime import datetime, timezone
from zoneinfo import ZoneInfo

import pytest

from anarchon.schedules.kinds import CronSchedule, datetime_to_ms

EXPRESSIONS = ["30 1 * * *", "30 2 * * *", "0 * * * *", "*/7 * * * *", "15 1-3 * * *",
               "0 0 29 2 *", "*/20 * * * * *", "5 30 2 * * *", "0 0 * * 1-5", "30 */2 * * *"]
ZONES = ["UTC", "America/New_York", "Europe/Berlin", "Australia/Lord_Howe", "Asia/Kathmandu"]
#: days with DST transitions (New York, Berlin, Lord Howe) and a leap day
DAYS = [datetime(2026, 3, 8), datetime(2026, 11, 1), datetime(2026, 3, 29),
        datetime(2026, 10, 25), datetime(2026, 4, 5), datetime(2028, 2, 28)]


def test_schedules_of_one_expression_and_zone_share_their_answers() -> None:
    a = CronSchedule("0  3 * * *", ZoneInfo("Europe/Paris"))
    b = CronSchedule("0 3 * * *", ZoneInfo("Europe/Paris"))
    other = CronSchedule("0 3 * * *", ZoneInfo("UTC"))
    assert a._answers is b._answers
    assert other._answers is not a._answers
    assert a.next_after(0) == b.next_after(0) == b._next_after(0)


def test_a_bad_expression_is_refused_every_time() -> None:
    for _ in range(2):
        with pytest.raises(ValueError, match="invalid cron expression '61 \\* \\* \\* \\*'"):
            CronSchedule("61 * * * *", ZoneInfo("UTC"))


@pytest.mark.parametrize("expr", EXPRESSIONS)
def test_shared_answers_equal_fresh_ones_in_any_order(expr: str) -> None:
    rnd = random.Random(expr)
    for zone in ZONES:
        cached = CronSchedule(expr, ZoneInfo(zone))
        for day in DAYS:
            start = datetime_to_ms(day.replace(tzinfo=timezone.utc)) - 86_400_000
            afters = [start + rnd.randrange(3 * 86_400_000) for _ in range(20)]
            slot: int | None = start
            for _ in range(12):  # each slot, and the instants either side of it
                slot = cached._next_after(slot) if slot is not None else None
                if slot is None:
                    break
                afters += [slot - 1, slot, slot + 1]
            rnd.shuffle(afters)
            for after in afters:
                assert cached.next_after(after) == cached._next_after(after), (zone, after)
