"""Celery ``solar`` entries as anarchon schedules, computed by Celery's own solar code.

A solar event (sunrise, dusk …) is a pure function of time and place, so every beat
computes the same slots: the next event after an instant is what Celery's
``solar.remaining_estimate`` gives for that instant as ``last_run_at``.

``ephem``'s answer depends on where its search starts, by up to a few tenths of a second
(measured), and beats ask from different instants. So each event is computed a second
time from a start derived from the event itself (six hours before the whole UTC hour it
falls in), and rounded to the second: every beat gets the same slot whatever it asked
from, unless the first estimate lies within that tenth of a second of a whole hour.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any

from anarchon.schedules.custom import register_schedule_type
from anarchon.schedules.kinds import Schedule, ms_to_datetime

UTC = timezone.utc
#: a search that lands on (or before) the previous slot restarts this much later
_STEP_MS = 60_000
_HOUR_MS = 3_600_000
#: the canonical search starts this long before the event's hour
_LEAD_MS = 6 * _HOUR_MS


class CelerySolarSchedule(Schedule):
    """The slots of one ``celery.schedules.solar`` (event, latitude, longitude)."""

    kind = "solar"

    def __init__(self, event: str, lat: float, lon: float) -> None:
        from celery.schedules import solar

        self.event, self.lat, self.lon = event, float(lat), float(lon)
        self._reference = datetime(2000, 1, 1, tzinfo=UTC)
        # Celery's ``now`` is pinned to the instant asked about: remaining_estimate(t)
        # is then exactly "next event after t" minus t, with no wall clock involved.
        self._solar = solar(event, lat, lon,  # type: ignore[arg-type]  # checked by solar
                            nowfun=lambda: self._reference)

    @classmethod
    def from_solar(cls, schedule: Any) -> CelerySolarSchedule:
        """Build from a ``celery.schedules.solar``."""
        return cls(schedule.event, schedule.lat, schedule.lon)

    def event_after(self, after: datetime) -> datetime:
        """Celery's next event after ``after`` (aware), unrounded."""
        self._reference = after
        result: datetime = (after + self._solar.remaining_estimate(after)).astimezone(UTC)
        return result

    def next_after(self, after_ms: int) -> int | None:
        start = after_ms
        for _ in range(3):
            estimate = round(self.event_after(ms_to_datetime(start)).timestamp() * 1000)
            canonical = estimate // _HOUR_MS * _HOUR_MS - _LEAD_MS
            event = self.event_after(ms_to_datetime(canonical))
            if abs(event.timestamp() * 1000 - estimate) > _LEAD_MS:
                event = ms_to_datetime(estimate)  # another event in between: keep it
            slot = round(event.timestamp()) * 1000
            if slot > after_ms:
                return slot
            start = max(start, estimate, slot) + _STEP_MS
        return None

    def describe(self) -> str:
        return f"solar {self.event} at latitude {self.lat:g}, longitude {self.lon:g}"

    def __repr__(self) -> str:
        return f"CelerySolarSchedule({self.event!r}, {self.lat!r}, {self.lon!r})"




#: the schedule type dynamic entries store solar schedules as (data: event, lat, lon)
SOLAR_TYPE = "celery.solar"


def solar_data(schedule: Any) -> dict[str, Any]:
    """A ``celery.schedules.solar`` as stored schedule data."""
    return {"event": str(schedule.event), "lat": float(schedule.lat),
            "lon": float(schedule.lon)}


def solar_from_data(data: Mapping[str, Any]) -> CelerySolarSchedule:
    """The slots of stored solar data (Celery checks the event and coordinates)."""
    return CelerySolarSchedule(str(data["event"]), float(data["lat"]), float(data["lon"]))


register_schedule_type(SOLAR_TYPE, solar_from_data)


__all__ = ["SOLAR_TYPE", "CelerySolarSchedule", "solar_data", "solar_from_data"]
