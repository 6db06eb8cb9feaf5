"""Heartbeats and liveness records on Redis/Valkey.

The records live in the namespace's hash ``ns-instances`` (``id -> "<last seen
ms>:<expires ms>:<JSON>"``, stamped by ``instance.lua`` with the server's ``TIME``) and
the zset ``ns-instances-expiry``, by which any beat deletes records dead for longer than
``KEEP_DEAD_MS``. On a single server the record's script rides in the heartbeat's round
trip (a pipeline of the two scripts); on a Cluster the namespace's keys are in another
slot than the jobs', so it is one more call, sent concurrently with the per-job ones.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from ..base import HeartbeatResult, HeldRun, LeaseBackend, RunKey, RunState
from ..capabilities import LivenessStore
from ..liveness import KEEP_DEAD_MS, InstanceInfo, InstanceRecord, Instances
from .connection import RedisStore, text
from .records import run_state

Call = tuple[str, list[str], list[object]]
Parts = tuple[set[RunKey], list[RunState], set[RunKey]]


class RedisLiveness(LivenessStore, LeaseBackend):
    """``heartbeat`` / ``heartbeat_live`` / ``leave`` / ``instances`` for a backend whose
    ``store`` is a RedisStore."""

    store: RedisStore

    async def heartbeat(self, owner: str, held: Sequence[HeldRun],
                        watched: Sequence[RunKey], lease_ms: int) -> HeartbeatResult:
        """Renew every held lease and read every watched run (one call per server, or
        one per job on a Cluster)."""
        return await self._beat(owner, held, watched, lease_ms, None)

    async def heartbeat_live(self, owner: str, held: Sequence[HeldRun],
                             watched: Sequence[RunKey], lease_ms: int, info: InstanceInfo,
                             ttl_ms: int) -> HeartbeatResult:
        """The heartbeat and ``instance.lua`` in one pipeline (a Cluster: concurrently)."""
        ns = self.store.namespace
        return await self._beat(owner, held, watched, lease_ms, (
            "instance", [ns.instances, ns.instances_expiry],
            [info.id, info.to_json(), ttl_ms, KEEP_DEAD_MS]))

    async def _beat(self, owner: str, held: Sequence[HeldRun], watched: Sequence[RunKey],
                    lease_ms: int, extra: Call | None) -> HeartbeatResult:
        groups: list[tuple[list[HeldRun], list[RunKey]]] = []
        if self.store.cluster:
            by_job: dict[str, tuple[list[HeldRun], list[RunKey]]] = defaultdict(
                lambda: ([], []))
            for run in held:
                by_job[run.name][0].append(run)
            for key in watched:
                by_job[key.name][1].append(key)
            groups = list(by_job.values())
        elif held or watched:
            groups = [(list(held), list(watched))]
        calls = [self._heartbeat_call(owner, h, w, lease_ms) for h, w in groups]
        extras = [] if extra is None else [extra]
        if self.store.cluster:
            answers = await asyncio.gather(*(self.store.script(*c) for c in calls + extras))
        elif calls or extras:
            answers = await self.store.scripts(calls + extras)
        else:
            answers = []
        lost: set[RunKey] = set()
        gone: set[RunKey] = set()
        states: list[RunState] = []
        for (h, w), answer in zip(groups, answers, strict=False):
            part_lost, part_states, part_gone = _parse(h, w, answer)
            lost |= part_lost
            gone |= part_gone
            states += part_states
        return HeartbeatResult(frozenset(lost), states, frozenset(gone))

    def _heartbeat_call(self, owner: str, held: Sequence[HeldRun],
                        watched: Sequence[RunKey], lease_ms: int) -> Call:
        index: dict[str, int] = {}
        keys: list[str] = []
        for name in [r.name for r in held] + [k.name for k in watched]:
            if name not in index:
                index[name] = len(index) + 1
                k = self.store.keys(name)
                keys += [k.runs, k.active]
        args: list[object] = [owner, lease_ms, len(held)]
        for run in held:
            args += [index[run.name], run.slot, run.attempt]
        for key in watched:
            args += [index[key.name], key.slot]
        return "heartbeat", keys, args

    async def leave(self, instance_id: str) -> None:
        ns = self.store.namespace
        await self.store.command("HDEL", ns.instances, instance_id)
        await self.store.command("ZREM", ns.instances_expiry, instance_id)

    async def instances(self) -> Instances:
        ns = self.store.namespace
        now_raw = await self.store.command("TIME")
        raw = await self.store.command("HGETALL", ns.instances)
        now = int(text(now_raw[0])) * 1000 + int(text(now_raw[1])) // 1000
        items: list[tuple[Any, Any]] = (list(raw.items()) if isinstance(raw, dict)
                                        else list(zip(raw[::2], raw[1::2], strict=True)))
        records = []
        for key, value in items:
            seen, expires, record = text(value).split(":", 2)
            records.append(InstanceRecord.decode(text(key), record, int(seen), int(expires)))
        return Instances(now, sorted(records, key=lambda r: r.id))


def _parse(held: Sequence[HeldRun], watched: Sequence[RunKey], answer: Any) -> Parts:
    now, lost_positions, raw_states, gone_positions = answer
    lost = {held[int(p) - 1].key for p in lost_positions}
    gone = {held[int(p) - 1].key for p in gone_positions}
    states = [run_state(key.name, key.slot, raw, int(now))
              for key, raw in zip(watched, raw_states, strict=True)]
    return lost, states, gone


__all__ = ["RedisLiveness"]
