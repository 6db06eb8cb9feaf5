"""Runtime control on Redis/Valkey (``anarchon.backends.control``): ``control.lua``.

Each job's record is the hash ``{<prefix>:<job>}:control`` (``v`` version, ``t`` text),
beside the job's run keys, so the claim scripts read it for the version fence inside
the claim's one ``EVALSHA``; its change log is the list ``{<prefix>:<job>}:changes``.
The namespace keeps a copy of every record (for ``read_controls()``), the generation
and the handler offers in the slot of the trigger list (``keys.NamespaceKeys``), so a
poll is one script: take the triggers, read the generation.

On a single server a change is one script: compare-and-set of the job's record, change
log, index copy, generation, ``PUBLISH``. On a Cluster the job's keys and the
namespace's live in different slots, which no script may span, so a change is two
calls in this order:

1. compare-and-set of the job's record and its change-log entry (the job's slot). From
   here on the fence holds: claims planned from an older record are refused as stale.
2. the index copy, the generation and the ``PUBLISH`` (the namespace's slot). The copy
   is written only over an older version, so a late or repeated call changes nothing.

A crash (or a lost connection) between the two leaves the index one version behind the
job's record: instances do not see the change yet, but cannot act on the old record
either (their claims are stale). Either repairs it: the next change of the job (its
compare-and-set is refused, and the refusal copies the stored record into the index
before answering 0, so the caller's retry reads it), and ``read_controls()`` after a
claim of this backend was refused as stale with a version the index does not hold yet
(it copies the job's record into the index, then reads again). Each repair raises the
generation and publishes, so every instance reads it.
"""

from __future__ import annotations

import json
from abc import abstractmethod
from collections.abc import Sequence
from typing import Any

from ..base import Poll, TriggerRequest
from ..capabilities import ControlStore
from ..control import (
    CHANGE_LOG_SIZE,
    OFFER_TTL_MS,
    ControlChange,
    ControlRecord,
    ControlSnapshot,
)
from ..wakeups import changed_payload
from .connection import RedisStore, text


def _pairs(flat: Any) -> list[tuple[str, str]]:
    """A flat ``HGETALL``-style reply as (field, value) texts."""
    return [(text(k), text(v)) for k, v in zip(flat[::2], flat[1::2], strict=True)]


class RedisControl(ControlStore):
    """Trigger polls and the control calls of a backend whose ``store`` is a RedisStore."""

    store: RedisStore
    #: jobs whose claims were refused as stale: the stored version the refusal named
    _fenced: dict[str, int]

    def _refused_stale(self, name: str, stored: int) -> None:
        """A claim was refused as stale at ``stored``: ``read_controls()`` checks that the
        index holds that version (it may not, on a Cluster: see the module docstring)."""
        self._fenced[name] = max(stored, self._fenced.get(name, 0))

    @abstractmethod
    async def _triggers(self, names: Sequence[str]) -> tuple[list[TriggerRequest], int]:
        """Take the live requests of ``names`` and read the generation (one script)."""

    async def poll(self, names: Sequence[str]) -> Poll:
        """Take the triggers and read the generation: one script call (one slot)."""
        return Poll(*await self._triggers(names))

    async def read_controls(self) -> ControlSnapshot:
        """Every record, the generation and the live offers (one script call; after a
        stale refusal whose version the index lacks, the index is repaired first)."""
        snapshot = await self._snapshot()
        fenced, self._fenced = self._fenced, {}
        behind = sorted(name for name, stored in fenced.items()
                        if stored > _version(snapshot, name))
        if not behind:
            return snapshot
        for name in behind:
            raw = await self.store.command("HMGET", self.store.keys(name).control, "v", "t")
            if raw[0] is not None:
                await self._index(name, int(text(raw[0])), text(raw[1] or b""))
        return await self._snapshot()

    async def _snapshot(self) -> ControlSnapshot:
        ns = self.store.namespace
        generation, index, offers = await self.store.script(
            "control", ns.every_key, ["read", OFFER_TTL_MS])
        records = {}
        for name, value in _pairs(index):
            version, _, body = value.partition(":")
            records[name] = ControlRecord(name, int(version), body)
        live = {instance: tuple(json.loads(value.partition(":")[2]))
                for instance, value in _pairs(offers)}
        return ControlSnapshot(int(generation), records, live)

    async def _index(self, name: str, version: int, body: str) -> None:
        """Copy a job's record into the index unless it holds this version or newer."""
        ns = self.store.namespace
        await self.store.script("control", [ns.index, ns.generation], [
            "index", name, version, body, self.store.wake_channel, changed_payload(name)])

    async def change_control(self, change: ControlChange) -> int:
        """Compare-and-set of the job's record (one script call on a single server; on a
        Cluster the job's record, then the index: see the module docstring)."""
        store = self.store
        k, ns = store.keys(change.name), store.namespace
        cas = [change.expected_version, change.text, change.entry, CHANGE_LOG_SIZE]
        if not store.cluster:
            reply = await store.script(
                "control", [k.control, k.changes, ns.index, ns.generation],
                ["change", change.name, *cas, store.wake_channel,
                 changed_payload(change.name)])
            return int(reply[0])
        version, stored, body = await store.script("control", [k.control, k.changes],
                                                   ["job", *cas])
        if int(stored) > 0:  # stored now, or the refusal's record: the index follows
            await self._index(change.name, int(stored), text(body))
        return int(version)

    async def change_log(self, name: str, count: int) -> list[str]:
        """The newest ``count`` entries, newest first (one ``LRANGE``)."""
        if count <= 0:
            return []
        raw = await self.store.command("LRANGE", self.store.keys(name).changes, 0, count - 1)
        return [text(entry) for entry in raw]

    async def offer_handlers(self, instance_id: str, handlers: Sequence[str]) -> None:
        """Store (or, with no names, withdraw) the offer at the server's time; offers
        past ``OFFER_TTL_MS`` are dropped on the way."""
        if not isinstance(instance_id, str) or not instance_id:
            raise ValueError(f"instance_id must be a non-empty str, got {instance_id!r}")
        names = json.dumps(list(handlers), ensure_ascii=False) if handlers else ""
        await self.store.script("control", [self.store.namespace.offers],
                                ["offer", instance_id, names, OFFER_TTL_MS])

    async def _control_names(self) -> list[str]:
        """The jobs the index holds a record of (for purging)."""
        raw = await self.store.command("HKEYS", self.store.namespace.index)
        return [text(name) for name in raw]


def _version(snapshot: ControlSnapshot, name: str) -> int:
    record = snapshot.records.get(name)
    return 0 if record is None else record.version


__all__ = ["RedisControl"]
