"""Record helpers shared by the lease strategy and the claim-only comparisons: the job
registry hash, manual and attempt records, and the arguments and replies of scripts."""

from __future__ import annotations

import json
import secrets
from collections.abc import Sequence
from typing import Any

from ...errors import IncompatibleStoreError
from ...history import RunRecord, RunStatus
from ..base import Finish, JobSpec, RunState
from ..decoding import readable
from ..frameworks import stored_kind, stored_spec
from .connection import KEY_FORMAT, RedisStore, read_history, text


async def register_jobs(store: RedisStore, jobs: Sequence[JobSpec]) -> dict[str, int]:
    """One script call; returns each job's first-seen time (server ms)."""
    if not jobs:
        return {}
    args: list[object] = []
    for job in jobs:
        args += [job.name, stored_kind(job), job.schedule]
    status, *first = await store.script("register", [store.jobs_key], [KEY_FORMAT, *args])
    if text(status) != "ok":
        found = text(first[0])
        raise IncompatibleStoreError(
            f"{store.kind} at {store.where}: the keys under prefix {store.prefix!r} use "
            f"anarchon's Redis key format {found}, this version needs format {KEY_FORMAT} "
            "(the job keys became '{<prefix>:<job>}'); nothing was changed. Let the runs "
            "finish, then purge the prefix (`anarchon purge`) or use a new prefix.")
    return {job.name: int(seen) for job, seen in zip(jobs, first, strict=True)}


async def known_jobs(store: RedisStore) -> list[JobSpec]:
    raw = await store.command("HGETALL", store.jobs_key)
    items = raw.items() if isinstance(raw, dict) else zip(raw[::2], raw[1::2], strict=True)
    # the field "" holds the key format (see connection.py), not a job
    jobs = readable([(name, value) for name, value in items if text(name)], _job_spec,
                    f"{store.kind} at {store.where}, hash {store.jobs_key}",
                    lambda item: f"field {text(item[0])!r} = {item[1]!r}")
    return sorted(jobs, key=lambda j: j.name)


def _job_spec(item: tuple[Any, Any]) -> JobSpec:
    name, value = item
    data = json.loads(text(value))
    seen = data.get("seen")  # written since registrations are refreshed
    return stored_spec(text(name), str(data.get("kind", "")), str(data.get("schedule", "")),
                       int(seen) if isinstance(seen, (int, float)) else None)


def finish_args(finish: Finish) -> list[object]:
    """The 9 script arguments of one finish (see finish_lib.lua)."""
    ttl = -1 if finish.history_ttl_ms is None else finish.history_ttl_ms
    return [finish.slot, finish.owner, finish.attempt, finish.status,
            0 if finish.error is None else 1, finish.error or "",
            finish.history_size, ttl, finish.retain_runs_ms]


def run_state(name: str, slot: int, raw: Any, now: int) -> RunState:
    """The state of run ``(name, slot)`` from its ``runs`` hash entry (``None``: no run)."""
    if not raw:
        return RunState(name, slot, "", 0, running=False, lease_expired=True,
                        handed_over=False)
    data = json.loads(text(raw))
    return RunState(name=name, slot=slot, owner=str(data.get("o", "")),
                    attempt=int(data.get("a", 0)), running=data.get("s") == "running",
                    lease_expired=int(data.get("l", 0)) <= now,
                    handed_over=int(data.get("h", 0)) == 1)


async def start_manual_record(store: RedisStore, name: str, owner: str,
                              started_ms: int) -> str:
    """Record a manual run as running; the token names its history field."""
    field = f"m:{started_ms}:{secrets.token_hex(4)}"
    k = store.keys(name)
    await store.script("manual", [k.att, k.hist], ["start", field, owner, started_ms, 1,
                                                   "manual"])
    return json.dumps([name, field])


async def finish_record(store: RedisStore, name: str, field: str, owner: str,
                        status: RunStatus, error: str | None, history_size: int,
                        history_ttl_ms: int | None) -> bool:
    """End one attempt record (fenced by ``owner`` unless empty) and trim the history."""
    k = store.keys(name)
    done = await store.script("manual", [k.att, k.hist], [
        "finish", field, owner, status, 0 if error is None else 1, error or "",
        history_size, -1 if history_ttl_ms is None else history_ttl_ms])
    return bool(int(done))


class RedisHistory:
    """Manual runs and history for a backend whose ``store`` is a RedisStore (the lease
    backend and the lab's claim-only strategies)."""

    store: RedisStore

    async def start_manual(self, name: str, owner: str, started_ms: int) -> str:
        return await start_manual_record(self.store, name, owner, started_ms)

    async def finish_manual(self, token: str, status: RunStatus, error: str | None,
                            history_size: int, history_ttl_ms: int | None) -> None:
        name, field = json.loads(token)
        await finish_record(self.store, name, field, "", status, error, history_size,
                            history_ttl_ms)

    async def history(self, name: str, count: int) -> list[RunRecord]:
        """Newest-first attempts from every instance (connects on demand)."""
        return await read_history(self.store, name, count)
