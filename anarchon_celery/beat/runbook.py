"""Beat entries' ``last_run_at`` and ``total_run_count`` follow the cluster's publishes.

Health checks read ``scheduler.schedule[name].last_run_at`` (and ``total_run_count``) as
they do with stock beat. Here they move on every beat, not only on the one that
published: a slot this beat won (event ``start``) or found taken by another beat (event
``skip``, reason ``taken``) was published by the cluster. At start the last run comes
from the store's history (one read per entry, in the background). ``last_run_at`` is the
slot's scheduled instant in the app's timezone; ``total_run_count`` counts the slots this
beat has seen published since it started (stock beat's count lives in its local file).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from datetime import tzinfo
from typing import Any

from anarchon import Event, RunRecord
from anarchon.schedules.kinds import ms_to_datetime

logger = logging.getLogger("anarchon.celery")
#: records read per entry at start to find its last published run among skip records
LOOKBACK = 20

History = Callable[[str, int], list[RunRecord]]


class RunBook:
    """Keeps ``entries`` (beat's ``ScheduleEntry`` objects by name) in step."""

    def __init__(self, entries: Mapping[str, Any], tz: tzinfo) -> None:
        self.entries = entries
        self.tz = tz
        self._last: dict[str, int] = {}
        self._lock = threading.Lock()

    def seen(self, name: str, slot: int, count: bool = True) -> None:
        """The cluster published ``name``'s ``slot`` (later slots only move it)."""
        entry = self.entries.get(name)
        if entry is None:
            return
        with self._lock:
            if slot <= self._last.get(name, -1):
                return
            self._last[name] = slot
            entry.last_run_at = ms_to_datetime(slot).astimezone(self.tz)
            if count:
                entry.total_run_count = (entry.total_run_count or 0) + 1

    def on_event(self, event: Event) -> None:
        """Listener for the core's ``start`` and ``skip`` events."""
        if event.name is None or event.slot is None:
            return
        published = ((event.type == "start" and event.reason != "manual")
                     or (event.type == "skip" and event.reason == "taken"))
        if published:
            self.seen(event.name, event.slot)

    def load(self, history: History, names: list[str]) -> threading.Thread:
        """Read each entry's last run from the store in a daemon thread."""
        def read() -> None:
            for name in names:
                try:
                    records = history(name, LOOKBACK)
                except Exception as exc:  # the store is down: events still move it
                    logger.debug("anarchon_celery: last run of %r not read: %s", name, exc)
                    return
                # a skip record (a slot given up as late or overlapping) was not published
                last = next((r for r in records if r.status != "skipped"), None)
                if last is not None and not last.manual:
                    self.seen(name, last.slot, count=False)

        thread = threading.Thread(target=read, name="anarchon-celery-runbook", daemon=True)
        thread.start()
        return thread


__all__ = ["RunBook"]
