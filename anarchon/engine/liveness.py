"""This instance's liveness record, refreshed by the lease keeper's beats.

On a [`LivenessStore`][anarchon.backends.capabilities.LivenessStore] the keeper beats
every heartbeat even when it holds and watches nothing (one call per heartbeat while
idle), and each beat carries the record: id, host, pid, version, start time and the runs
held. It is alive for lease + one heartbeat after each beat, so a killed instance shows
as not alive within lease + 2 heartbeats; ``stop()`` removes it.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Sequence
from importlib import metadata

from ..backends.base import HeartbeatResult, HeldRun, LeaseBackend, RunKey
from ..backends.capabilities import LivenessStore
from ..backends.liveness import InstanceInfo
from ..durations import to_ms

logger = logging.getLogger("anarchon")


class Liveness:
    """The record of instance ``instance_id`` in ``store`` (lease and heartbeat in
    seconds)."""

    def __init__(self, store: LivenessStore, instance_id: str, lease: float,
                 heartbeat: float) -> None:
        self.store = store
        self.instance_id = instance_id
        self.lease_ms = to_ms(lease)
        self.ttl_ms = to_ms(lease + heartbeat)
        self.host = socket.gethostname()
        self.pid = os.getpid()
        self.started_ms = int(time.time() * 1000)
        self.version = package_version()

    def info(self, held: Sequence[HeldRun]) -> InstanceInfo:
        return InstanceInfo(self.instance_id, self.host, self.pid, self.version,
                            self.started_ms, self.lease_ms,
                            tuple((r.name, r.slot, r.attempt) for r in held))

    async def beat(self, owner: str, held: Sequence[HeldRun],
                   watched: Sequence[RunKey], lease_ms: int) -> HeartbeatResult:
        """The keeper's heartbeat with this record."""
        return await self.store.heartbeat_live(owner, held, watched, lease_ms, self.info(held),
                                          self.ttl_ms)

    async def leave(self) -> None:
        """Remove the record (at stop; a store that does not answer keeps it until it
        expires)."""
        try:
            await self.store.leave(self.instance_id)
        except Exception as exc:
            logger.debug("removing liveness record %s: %s", self.instance_id, exc)


def package_version() -> str:
    """anarchon's installed version (``unknown`` when run from a bare source tree)."""
    try:
        return metadata.version("anarchon")
    except metadata.PackageNotFoundError:
        return "unknown"


def liveness_for(backend: LeaseBackend, instance_id: str, lease: float,
                 heartbeat: float) -> Liveness | None:
    """A record to keep when ``backend`` stores them, else ``None``."""
    if isinstance(backend, LivenessStore):
        return Liveness(backend, instance_id, lease, heartbeat)
    return None


__all__ = ["Liveness", "liveness_for", "package_version"]
