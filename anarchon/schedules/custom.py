"""Schedule types beyond every/cron/at that dynamic jobs can store as data.

A layer (or an application) registers a type under a name with a factory that builds the
[`Schedule`][anarchon.schedules.Schedule] from JSON data:
``register_schedule_type("celery.solar", build)``. A dynamic job then stores
``custom={"type": "celery.solar", "data": {...}}``; every instance that registered the
type computes the same slots from the same data, and an instance that did not register it
does not run the job (it logs a warning once).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from .kinds import Schedule

#: builds a schedule from the stored data (raises ``TypeError``/``ValueError`` on bad data)
ScheduleFactory = Callable[[Mapping[str, Any]], Schedule]

_NAME = re.compile(r"[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*")
_TYPES: dict[str, ScheduleFactory] = {}


def register_schedule_type(name: str, factory: ScheduleFactory) -> None:
    """Let dynamic jobs store schedules of type ``name`` (dotted lower-case words, e.g.
    ``"celery.solar"``), built by ``factory(data)``. Registering the same factory again
    is allowed; another factory under a taken name is refused."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ValueError(f"schedule type name must be dotted lower-case words (e.g. "
                         f"'celery.solar'), got {name!r}")
    if not callable(factory):
        raise TypeError(f"schedule type {name!r}: factory must be callable, got {factory!r}")
    known = _TYPES.get(name)
    if known is not None and known is not factory:
        raise ValueError(f"schedule type {name!r} is registered already (by {known!r})")
    _TYPES[name] = factory


def schedule_types() -> list[str]:
    """The names of the registered schedule types."""
    return sorted(_TYPES)


def check_custom(value: Any, job: str) -> dict[str, Any]:
    """``custom=`` as stored: ``{"type": name, "data": {...}}`` with JSON data; raises
    ``TypeError``/``ValueError`` naming the job and what is wrong."""
    if not isinstance(value, Mapping) or set(value) != {"type", "data"}:
        raise TypeError(f"job {job!r}: custom= must be a dict with 'type' and 'data', got "
                        f"{value!r}")
    name, data = value["type"], value["data"]
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ValueError(f"job {job!r}: custom schedule type must be a registered type "
                         f"name, got {name!r}")
    if not isinstance(data, Mapping):
        raise TypeError(f"job {job!r}: custom schedule data must be a dict, got {data!r}")
    try:
        text = json.dumps(data, allow_nan=False, sort_keys=True)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"job {job!r}: custom schedule data must be JSON: {exc}") from None
    return {"type": name, "data": json.loads(text)}


def build_custom(value: Any, job: str) -> Schedule:
    """The schedule of a stored ``custom`` value; ``ValueError`` when its type is not
    registered in this process or its factory refuses the data."""
    checked = check_custom(value, job)
    factory = _TYPES.get(checked["type"])
    if factory is None:
        raise ValueError(f"job {job!r}: schedule type {checked['type']!r} is not registered "
                         "in this process (register_schedule_type(); known: "
                         f"{schedule_types() or 'none'})")
    try:
        schedule = factory(checked["data"])
    except (TypeError, ValueError, KeyError) as exc:
        raise ValueError(f"job {job!r}: {checked['type']} schedule data "
                         f"{checked['data']!r} refused: {exc}") from None
    if not isinstance(schedule, Schedule):
        raise TypeError(f"job {job!r}: schedule type {checked['type']!r} built "
                        f"{schedule!r}, not a Schedule")
    return schedule


__all__ = ["ScheduleFactory", "build_custom", "check_custom", "register_schedule_type",
           "schedule_types"]
