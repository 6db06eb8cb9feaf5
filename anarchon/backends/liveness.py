"""Liveness records: which instances run, on which host, and which runs they hold.

Every instance of a [`LivenessStore`][anarchon.backends.capabilities.LivenessStore]
keeps one record, written with its heartbeat (in the heartbeat's round trip where the
store allows it) and removed at ``stop()``. The store stamps it with its own clock:
``last_seen`` (the beat's time) and ``expires`` (``last_seen`` + the ttl the instance
asked for, its lease plus one heartbeat): a record is *alive* while ``expires`` is ahead
of the store's clock, so an instance killed without a word shows as not alive within
lease + 2 heartbeats. A record not refreshed for `KEEP_DEAD_MS` after it expired is
deleted by the next beat of any instance (the records stay bounded).

The instance writes its part as JSON (`InstanceInfo.to_json()`): host, pid, version,
start time, lease and the runs it holds (job, slot, attempt); each run's lease ends at
``last_seen + lease`` (the beat renewed it at the same instant).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

#: how long a record stays after it expired (so ``status`` shows a dead instance), ms
KEEP_DEAD_MS = 3_600_000


@dataclass(frozen=True)
class LiveRun:
    """A run an instance holds, as its liveness record tells it."""

    job: str
    slot: int
    attempt: int
    #: epoch ms when its lease ends (the store's clock), unless renewed
    lease_expires_ms: int


@dataclass(frozen=True)
class InstanceInfo:
    """What an instance writes about itself at every beat."""

    id: str
    host: str
    pid: int
    version: str
    started_ms: int
    lease_ms: int
    #: ``(job, slot, attempt)`` of each run it holds
    running: tuple[tuple[str, int, int], ...] = ()

    def to_json(self) -> str:
        return json.dumps({"host": self.host, "pid": self.pid, "version": self.version,
                           "started": self.started_ms, "lease": self.lease_ms,
                           "running": [list(r) for r in self.running]},
                          separators=(",", ":"))


@dataclass(frozen=True)
class InstanceRecord:
    """One stored liveness record, read back with the store's clock."""

    id: str
    host: str
    pid: int
    version: str
    started_ms: int
    last_seen_ms: int
    expires_ms: int
    running: tuple[LiveRun, ...] = field(default=())

    def alive(self, now_ms: int) -> bool:
        return self.expires_ms > now_ms

    @classmethod
    def decode(cls, instance_id: str, text: str, last_seen_ms: int,
               expires_ms: int) -> InstanceRecord:
        """The record from the JSON an instance wrote and the store's two stamps."""
        data: dict[str, Any] = json.loads(text)
        lease = int(data.get("lease", 0))
        running = tuple(LiveRun(str(r[0]), int(r[1]), int(r[2]), last_seen_ms + lease)
                        for r in data.get("running", []))
        return cls(instance_id, str(data.get("host", "")), int(data.get("pid", 0)),
                   str(data.get("version", "")), int(data.get("started", 0)),
                   int(last_seen_ms), int(expires_ms), running)


@dataclass(frozen=True)
class Instances:
    """Every stored record and the store's time when they were read."""

    now_ms: int
    records: list[InstanceRecord]


__all__ = ["KEEP_DEAD_MS", "InstanceInfo", "InstanceRecord", "Instances", "LiveRun"]
