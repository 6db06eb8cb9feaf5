"""What the log says of each event: one child logger of ``anarchon`` per concern.

Every record carries the ``extra`` fields ``anarchon_job``, ``anarchon_slot`` (epoch ms),
``anarchon_attempt`` and ``anarchon_instance`` (``None`` where they do not apply), so
JSON formatters, Sentry and structlog pick them up. Logged whether or not a listener is
registered (docs/operations.md, *Logging*).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from ..schedules.kinds import ms_to_datetime

#: a job's runs: failures (ERROR, with the traceback), timeouts and stops, starts (DEBUG)
runs_logger = logging.getLogger("anarchon.runs")
#: skipped slots: late, overlap, paused, missed, early (INFO; a WARNING when they persist)
skips_logger = logging.getLogger("anarchon.skips")
#: leases: takeovers, hand-overs, retries (attempt > 1), runs whose lease was lost
leases_logger = logging.getLogger("anarchon.leases")
#: store calls that failed (DEBUG: the ``anarchon`` logger says outages once, at WARNING)
store_logger = logging.getLogger("anarchon.store")
#: control changes: pause, resume, reschedule, add/remove of dynamic jobs
control_logger = logging.getLogger("anarchon.control")

#: a job's skips "persist" after this many skipped slots in a row (late, overlap, missed
#: or early; a run started or a slot taken by another instance ends the row)
PERSIST_AFTER = 3
#: then one WARNING per job at most this often (seconds)
WARN_EVERY = 300.0
#: skip reasons that count towards a persisting row (``taken`` is normal in a cluster,
#: ``paused`` is what an operator asked for)
_TROUBLE = frozenset({"late", "overlap", "missed", "early"})


_FIELDS = ("anarchon_job", "anarchon_slot", "anarchon_attempt", "anarchon_instance")


class _Fields(logging.Filter):
    """Gives every record of anarchon's loggers the four fields (``None`` when unset), so
    that a formatter can name them whatever logged the record."""

    def filter(self, record: logging.LogRecord) -> bool:
        for key in _FIELDS:
            if not hasattr(record, key):
                setattr(record, key, None)
        return True


for _name in ("anarchon", "anarchon.runs", "anarchon.skips", "anarchon.leases",
              "anarchon.store", "anarchon.control", "anarchon.celery", "anarchon.dramatiq",
              "anarchon_django"):
    logging.getLogger(_name).addFilter(_Fields())


def fields(name: str | None, slot: int | None, attempt: int | None,
           instance: str) -> dict[str, Any]:
    """The ``extra`` of a record about one job's slot."""
    return {"anarchon_job": name, "anarchon_slot": slot, "anarchon_attempt": attempt,
            "anarchon_instance": instance}


def _at(slot: int | None) -> str:
    return "-" if slot is None else ms_to_datetime(slot).isoformat()


class RunLog:
    """Logs the events of one scheduler (its instance id in every record)."""

    def __init__(self, instance: str, monotonic: Callable[[], float] = time.monotonic
                 ) -> None:
        self.instance = instance
        self._monotonic = monotonic
        self._skips_in_row: dict[str, int] = {}
        self._warned_at: dict[str, float] = {}

    def event(self, type_: str, name: str | None, slot: int | None, attempt: int | None,
              reason: str | None, error: BaseException | None) -> None:
        extra = fields(name, slot, attempt, self.instance)
        if type_ == "start":
            self._started(name, slot, attempt, reason, extra)
        elif type_ == "failure":
            runs_logger.error("job %r slot %s attempt %s failed on %s (%s run): %s", name,
                              _at(slot), attempt, self.instance, reason, _text(error),
                              exc_info=_exc_info(error), extra=extra)
        elif type_ == "success":
            if runs_logger.isEnabledFor(logging.DEBUG):
                runs_logger.debug("job %r slot %s attempt %s succeeded", name, _at(slot),
                                  attempt, extra=extra)
        elif type_ == "interrupted" and reason != "lost":  # "lost" is said by the lost event
            level = logging.WARNING if reason == "timeout" else logging.INFO
            what = ("timed out" if reason == "timeout"
                    else "handed over at stop (a backup takes it over)")
            runs_logger.log(level, "job %r slot %s attempt %s %s", name, _at(slot), attempt,
                            what, extra=extra)
        elif type_ == "lost":
            leases_logger.warning("job %r slot %s attempt %s: lease lost; the run was "
                                  "aborted and is a backup's to take over", name, _at(slot),
                                  attempt, extra=extra)
        elif type_ == "skip":
            self._skipped(name, slot, reason, extra)
        elif type_ == "error":
            if store_logger.isEnabledFor(logging.DEBUG):
                store_logger.debug("store call failed%s: %s",
                                   f" (job {name!r})" if name else "", _text(error),
                                   extra=extra)
        elif type_ == "change":
            control_logger.info("job %r changed: %s", name, reason, extra=extra)

    def _started(self, name: str | None, slot: int | None, attempt: int | None,
                 reason: str | None, extra: dict[str, Any]) -> None:
        if name is not None:
            self._skips_in_row.pop(name, None)
        if reason == "takeover":
            leases_logger.info("job %r slot %s: taking over as attempt %s", name, _at(slot),
                               attempt, extra=extra)
        elif attempt is not None and attempt > 1:
            leases_logger.info("job %r slot %s: retrying as attempt %s (%s)", name,
                               _at(slot), attempt, reason, extra=extra)
        elif runs_logger.isEnabledFor(logging.DEBUG):
            runs_logger.debug("job %r slot %s attempt %s started (%s)", name, _at(slot),
                              attempt, reason, extra=extra)

    def _skipped(self, name: str | None, slot: int | None, reason: str | None,
                 extra: dict[str, Any]) -> None:
        if reason == "taken":  # another instance runs it: the normal case in a cluster
            if name is not None:
                self._skips_in_row.pop(name, None)
            if skips_logger.isEnabledFor(logging.DEBUG):
                skips_logger.debug("job %r slot %s: taken by another instance", name,
                                   _at(slot), extra=extra)
            return
        skips_logger.info("job %r slot %s skipped: %s", name, _at(slot), reason, extra=extra)
        if name is None or reason not in _TROUBLE:
            return
        row = self._skips_in_row[name] = self._skips_in_row.get(name, 0) + 1
        now = self._monotonic()
        last = self._warned_at.get(name)
        if row >= PERSIST_AFTER and (last is None or now - last >= WARN_EVERY):
            self._warned_at[name] = now
            skips_logger.warning("job %r: %d slots in a row skipped (the last: %s); its "
                                 "slots are not running (next warning in %.0fs at most)",
                                 name, row, reason, WARN_EVERY, extra=extra)


def _text(error: BaseException | None) -> str:
    if error is None:
        return "-"
    return f"{type(error).__name__}: {error}"


def _exc_info(error: BaseException | None) -> Any:
    if error is None:
        return None
    return (type(error), error, error.__traceback__)


__all__ = ["PERSIST_AFTER", "RunLog", "WARN_EVERY", "fields"]
