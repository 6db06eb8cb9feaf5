"""What ``anarchon status`` shows: the instances (alive or not, by the store's clock) with
the runs each holds, every job's next slot, the paused jobs and the last failures.

`read_status()` reads it from a store; `status_document()` is its JSON form (the one
``anarchon status --json``, ``manage.py anarchon status --json`` and the admin print).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from ..backends.base import Backend
from ..backends.capabilities import LivenessStore
from ..backends.liveness import Instances
from ..engine.scheduler import AsyncScheduler
from ..history import JobInfo, RunRecord

#: attempts read per job when looking for its last failure
FAILURE_SCAN = 20
#: failures listed (newest first)
FAILURES_SHOWN = 10


@dataclass
class Status:
    """One reading of a store."""

    instances: Instances
    jobs: list[JobInfo]
    failures: list[RunRecord] = field(default_factory=list)
    #: why instances are not listed (a store without liveness records), else ``None``
    no_instances: str | None = None


async def read_status(backend: Backend) -> Status:
    """Read the status from ``backend`` (opened here, closed after)."""
    scheduler = AsyncScheduler(backend)
    try:
        jobs = list(await scheduler.jobs())
        failures: list[RunRecord] = []
        for job in jobs:
            failures += [r for r in await scheduler.history(job.name, FAILURE_SCAN)
                         if r.status == "failure"][:1]
        failures.sort(key=lambda r: r.started_at, reverse=True)
        if isinstance(backend, LivenessStore):
            return Status(await backend.instances(), jobs, failures[:FAILURES_SHOWN])
        now = int(datetime.now(timezone.utc).timestamp() * 1000)
        return Status(Instances(now, []), jobs, failures[:FAILURES_SHOWN],
                      f"backend {backend.name} keeps no liveness records")
    finally:
        await scheduler.stop()


def iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, timezone.utc).isoformat(timespec="milliseconds")


def last_line(error: str | None) -> str:
    """The last line of an error text (a traceback's exception line)."""
    lines = (error or "").strip().splitlines()
    return lines[-1] if lines else ""


def status_document(status: Status) -> dict[str, Any]:
    """The JSON form: ``{"now", "instances": [...], "jobs": [...], "failures": [...]}``."""
    now = status.instances.now_ms
    instances = [{
        "id": r.id, "host": r.host, "pid": r.pid, "version": r.version,
        "started_at": iso(r.started_ms), "last_seen": iso(r.last_seen_ms),
        "alive": r.alive(now),
        "running": [{"job": run.job, "slot": iso(run.slot), "attempt": run.attempt,
                     "lease_expires_at": iso(run.lease_expires_ms)}
                    for run in r.running],
    } for r in status.instances.records]
    jobs = [{"name": j.name, "kind": j.kind, "schedule": j.schedule,
             "next_run": None if j.next_run is None else j.next_run.isoformat(),
             "paused": j.paused, "source": j.source, "framework": j.framework}
            for j in status.jobs]
    failures = [{"job": r.name, "slot": r.scheduled_at.isoformat(), "attempt": r.attempt,
                 "instance": r.instance_id, "started_at": r.started_at.isoformat(),
                 "error": last_line(r.error)}
                for r in status.failures]
    document: dict[str, Any] = {"now": iso(now), "instances": instances, "jobs": jobs,
                                "failures": failures}
    if status.no_instances is not None:
        document["instances_note"] = status.no_instances
    return document


def status_lines(status: Status) -> list[str]:
    """The text form, one line per instance, run, job and failure."""
    now = status.instances.now_ms
    lines = [f"store time {iso(now)}", "", "INSTANCES"]
    if status.no_instances is not None:
        lines.append(f"  ({status.no_instances})")
    elif not status.instances.records:
        lines.append("  none")
    for r in status.instances.records:
        state = "alive" if r.alive(now) else "NOT ALIVE"
        lines.append(f"  {r.id}  host {r.host}  pid {r.pid}  version {r.version}  "
                     f"started {iso(r.started_ms)}  last seen {(now - r.last_seen_ms) / 1000:.1f}s"
                     f" ago  {state}")
        for run in r.running:
            left = (run.lease_expires_ms - now) / 1000
            lines.append(f"    running {run.job}  slot {iso(run.slot)}  attempt {run.attempt}"
                         f"  lease {left:.1f}s left")
    lines += ["", "JOBS"]
    if not status.jobs:
        lines.append("  none")
    for j in status.jobs:
        next_run = "-" if j.next_run is None else j.next_run.isoformat()
        lines.append(f"  {j.name}  {j.schedule}  next {next_run}"
                     + ("  PAUSED" if j.paused else ""))
    lines += ["", "LAST FAILURES"]
    if not status.failures:
        lines.append("  none")
    for f in status.failures:
        lines.append(f"  {f.started_at.isoformat()}  {f.name}  attempt {f.attempt}  "
                     f"{f.instance_id}  {last_line(f.error)}")
    return lines


__all__ = ["Status", "read_status", "status_document", "status_lines"]
