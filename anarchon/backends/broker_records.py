"""Attempt records as broker messages, shared by the RabbitMQ and NATS backends.

A broker keeps history as an append-only log of small JSON messages per job: one when an
attempt starts (``running``) and one when it ends, each complete on its own, so a log
trimmed by count still yields whole records. ``merge()`` folds the log into
[`RunRecord`][anarchon.history.RunRecord] values, newest first.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..history import RunReason, RunRecord, RunStatus
from ..schedules.kinds import ms_to_datetime

#: bump when the message format changes incompatibly
FORMAT = 1


@dataclass(frozen=True)
class Entry:
    """One history message: the state of one attempt at the time it was written."""

    key: str
    name: str
    slot: int
    owner: str
    manual: bool
    attempt: int
    reason: RunReason
    status: RunStatus
    started_ms: int
    finished_ms: int | None = None
    error: str | None = None

    def encode(self) -> bytes:
        return json.dumps({
            "v": FORMAT, "k": self.key, "n": self.name, "s": self.slot, "o": self.owner,
            "m": self.manual, "a": self.attempt, "r": self.reason, "st": self.status,
            "t0": self.started_ms, "t1": self.finished_ms, "e": self.error,
        }, separators=(",", ":")).encode()

    @classmethod
    def decode(cls, body: bytes) -> Entry | None:
        """The entry in ``body``, or None for a message this version cannot read."""
        try:
            raw: dict[str, Any] = json.loads(body)
            if raw.get("v") != FORMAT:
                return None
            return cls(str(raw["k"]), str(raw["n"]), int(raw["s"]), str(raw["o"]),
                       bool(raw["m"]), int(raw["a"]), raw["r"], raw["st"], int(raw["t0"]),
                       None if raw["t1"] is None else int(raw["t1"]), raw["e"])
        except (ValueError, KeyError, TypeError):
            return None

    def finished(self, status: RunStatus, error: str | None, now_ms: int) -> Entry:
        return Entry(self.key, self.name, self.slot, self.owner, self.manual, self.attempt,
                     self.reason, status, self.started_ms, now_ms, error)

    def record(self) -> RunRecord:
        duration = (None if self.finished_ms is None
                    else max(0, self.finished_ms - self.started_ms) / 1000)
        return RunRecord(
            self.name, self.slot, ms_to_datetime(self.slot), self.owner, self.manual,
            self.attempt, self.reason, self.status, ms_to_datetime(self.started_ms),
            None if self.finished_ms is None else ms_to_datetime(self.finished_ms),
            duration, self.error,
        )


def scheduled_key(slot: int, attempt: int) -> str:
    return f"{slot}:{attempt}"


def merge(entries: Iterable[Entry], count: int) -> list[RunRecord]:
    """Fold a log (oldest first) into the newest ``count`` records: a finished entry
    replaces the running one of the same attempt."""
    latest: OrderedDict[str, Entry] = OrderedDict()
    for entry in entries:
        seen = latest.get(entry.key)
        if seen is None or seen.status == "running":
            latest[entry.key] = entry
    ordered = sorted(latest.values(), key=lambda e: (e.started_ms, e.slot), reverse=True)
    return [entry.record() for entry in ordered[:count]]


class Remembered:
    """Slots this process won, so ``confirm``/``finish`` can answer without the broker."""

    def __init__(self, limit: int = 10_000) -> None:
        self._won: OrderedDict[tuple[str, int], tuple[str, int]] = OrderedDict()
        self._limit = limit

    def add(self, name: str, slot: int, owner: str, started_ms: int) -> None:
        self._won[(name, slot)] = (owner, started_ms)
        while len(self._won) > self._limit:
            self._won.popitem(last=False)

    def owner(self, name: str, slot: int) -> str | None:
        """The owner that won ``(name, slot)`` here, or None if unknown to this process."""
        won = self._won.get((name, slot))
        return won[0] if won else None

    def started(self, name: str, slot: int) -> int | None:
        """When the won attempt started (store time of the claim), if known here."""
        won = self._won.get((name, slot))
        return won[1] if won else None
