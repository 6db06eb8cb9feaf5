"""Entries whose schedule decides by itself: its own ``is_due`` on a shared ``last_run_at``.

Custom ``BaseSchedule`` subclasses, ``crontab`` subclasses that override ``is_due`` or
``remaining_estimate``, and ``relative=True`` intervals are not a pure function of time,
so beats cannot compute their slots alike. Every beat instead runs what stock beat runs —
``schedule.is_due(last_run_at)``, then sleep the seconds it returned — on the entry's
``last_run_at`` kept in the store. A due entry is published by the beat whose
compare-and-set of ``last_run_at`` (from the value it read to the current time) succeeds:
the others read a value that changed and publish nothing. The cluster thus publishes such
an entry as often as one stock beat would, never once per beat.

The publish goes through beat's ``apply_entry`` (``SharedCall``), as stock beat's does:
it logs "Sending due task", hooks that wrap it (Sentry Crons) see it, and a failed send
is logged as "Message Error".

What this path does not give (slots, leases): a beat that dies between winning the swap
and publishing loses that one run, as stock beat does (it also reserves ``last_run_at``
before sending); nothing is published again, and outcomes are not tracked.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, tzinfo
from typing import Any, Protocol

from anarchon_celery.beat.loop import BackgroundLoop
from anarchon_celery.tasks.publish import BeatCall, send_entry

logger = logging.getLogger("anarchon.celery")

#: the store field holding an entry's shared state (JSON: at, count, by)
FIELD = "celery_last_run"
_NAMESPACE = uuid.UUID("0b7e4c52-2f7a-4a53-8f6e-5c3e8d1f2a90")
#: shortest wait between two checks of one entry (is_due may answer 0)
_MIN_WAIT = 0.05


class Values(Protocol):
    """The compare-and-set store operations (``anarchon.Scheduler`` has them)."""

    def read_value(self, name: str, field: str) -> str | None: ...

    def swap_value(self, name: str, field: str, expected: str | None,
                   value: str) -> bool: ...


@dataclass
class SharedEntry:
    """One entry on this path and when this beat checks it next (monotonic)."""

    name: str
    entry: Any
    publish_options: Mapping[str, Any]
    next_check: float = 0.0


class SharedCall(BeatCall):
    """One publish of a shared entry as beat's ``apply_entry`` is given it (``name``,
    ``task``, ``schedule``, ``args``, ``kwargs``, ``options``: a copy hooks may change,
    ``last_run_at``, ``total_run_count``); ``run()`` sends it and raises what the broker
    raised, which ``apply_entry`` logs as stock beat does."""

    def __init__(self, app: Any, entry: Any, publish_options: Mapping[str, Any],
                 task_id: str) -> None:
        self.app, self.entry, self.task_id = app, entry, task_id
        self.name, self.task, self.schedule = entry.name, entry.task, entry.schedule
        self.args, self.kwargs = entry.args, entry.kwargs
        self.options = dict(publish_options)
        self.last_run_at = entry.last_run_at
        self.total_run_count = entry.total_run_count

    def run(self) -> Any:
        return send_entry(self.app, self.entry, self.options, {}, self.task_id, log=False)


class SharedRunner(BackgroundLoop):
    """Checks the shared entries in one daemon thread; see the module doc."""

    thread_name = "anarchon-celery-shared"

    def __init__(self, app: Any, values: Values, instance_id: str, tz: tzinfo,
                 max_interval: float,
                 apply_entry: Callable[[Any], Any] | None = None) -> None:
        super().__init__()
        self.app = app
        #: beat's ``apply_entry`` (None: send directly, logging stock beat's lines)
        self.apply_entry = apply_entry
        self.values = values
        self.instance_id = instance_id
        self.tz = tz
        self.max_interval = max_interval
        self.entries: dict[str, SharedEntry] = {}

    def add(self, name: str, entry: Any, publish_options: Mapping[str, Any]) -> None:
        self.entries[name] = SharedEntry(name, entry, publish_options)

    def start(self) -> None:
        if self.entries:
            super().start()

    def _run(self) -> None:
        while not self._stop.is_set():
            now = time.monotonic()
            for shared in self.entries.values():
                if shared.next_check <= now and not self._stop.is_set():
                    try:
                        wait = self.check(shared)
                    except Exception as exc:  # the store or the schedule failed: later
                        logger.warning("beat entry %r: not checked: %s", shared.name, exc)
                        wait = min(self.max_interval, 5.0)
                    shared.next_check = time.monotonic() + wait
            soonest = min(s.next_check for s in self.entries.values())
            self._stop.wait(max(soonest - time.monotonic(), _MIN_WAIT))

    def check(self, shared: SharedEntry) -> float:
        """Ask the schedule whether the entry is due on the shared ``last_run_at``;
        publish if due and this beat's swap wins. Returns seconds to the next check."""
        name = shared.name
        raw = self.values.read_value(name, FIELD)
        if raw is None:
            # never run anywhere: like a stock beat's new entry, it counts from now
            seed = json.dumps({"at": time.time(), "count": 0, "by": self.instance_id})
            self.values.swap_value(name, FIELD, None, seed)
            raw = self.values.read_value(name, FIELD)
            if raw is None:
                return _MIN_WAIT
        state = json.loads(raw)
        last = datetime.fromtimestamp(float(state["at"]), self.tz)
        due, next_seconds = shared.entry.schedule.is_due(last)
        wait = min(max(float(next_seconds), _MIN_WAIT), self.max_interval)
        if not due:
            self._seen(name, state)
            return wait
        now = time.time()
        new = {"at": now, "count": int(state.get("count", 0)) + 1, "by": self.instance_id}
        if not self.values.swap_value(name, FIELD, raw, json.dumps(new)):
            return _MIN_WAIT  # another beat published it: read its value next
        self._seen(name, new)
        task_id = str(uuid.uuid5(_NAMESPACE, f"{name}\x00{round(now * 1000)}"))
        # as stock beat: last_run_at is already reserved; a failed send loses the run
        # (apply_entry logs it as "Message Error")
        if self.apply_entry is not None:
            self.apply_entry(SharedCall(self.app, shared.entry, shared.publish_options,
                                        task_id))
            return wait
        try:
            send_entry(self.app, shared.entry, shared.publish_options, {}, task_id)
        except Exception as exc:
            logger.error("Message Error: Couldn't apply scheduled task %s: %s", name, exc)
        return wait

    def _seen(self, name: str, state: Mapping[str, Any]) -> None:
        entry = self.entries[name].entry
        entry.last_run_at = datetime.fromtimestamp(float(state["at"]), self.tz)
        entry.total_run_count = int(state.get("count", 0))


__all__ = ["FIELD", "SharedCall", "SharedRunner", "Values"]
