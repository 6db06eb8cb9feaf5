"""The store's rules as synchronous ORM code, run in whichever thread owns the connection.

``Store`` implements [`ClaimRequest`][anarchon.backends.base.ClaimRequest]'s rules (the same
as the core's SQLite and PostgreSQL stores) with transactions, ``select_for_update``
and a unique constraint on ``(job, slot)``; times come from the database's clock.

Serialisation: a claim first locks its job's row (``SELECT … FOR UPDATE`` on PostgreSQL
and MySQL/MariaDB; on SQLite, whose ``select_for_update`` does nothing, a write statement
that takes the database's write lock at once, so a read lock is never upgraded — the
upgrade is what deadlocks deferred SQLite transactions). Fenced writes (renew, release,
finish, note) are ``UPDATE … WHERE owner = … AND attempt = …`` whose row count is the
answer. The unique constraint settles two claims of one slot of a job nobody registered.
The version fence of runtime control is a locked read of the job's control row inside
the claim's transaction (``anarchon_django.store.control``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import IntegrityError, transaction

from anarchon.backends.base import (
    ClaimRequest,
    ClaimResult,
    Finish,
    HeartbeatResult,
    HeldRun,
    JobSpec,
    Poll,
    RunKey,
    RunState,
    TriggerRequest,
)
from anarchon.backends.control import ControlChange, ControlSnapshot
from anarchon.backends.decoding import checked, ms_datetime, readable
from anarchon.backends.frameworks import stored_kind, stored_spec
from anarchon.backends.trigger_rules import REASONS, STALE_MANUAL_AFTER, Refusal, refused
from anarchon.history import RunRecord, RunStatus

from . import heartbeat_rounds
from .claim_rounds import judge_batch
from .control import ControlOperations
from .finish_rounds import bound_history, finish_batch
from .lone_claim import LoneClaim
from .models import StoreAttempt, StoreJob
from .tables import StoreTables


class Store:
    """Store operations on database ``alias``; call them in the thread that owns it.

    Composed of its parts, each given what it uses: ``tables`` (the querysets, the
    clock, the shared row helpers), ``control`` (runtime control) and ``lone`` (one
    claim judged by the claim rules); the batch rounds receive ``tables`` (and ``lone``)."""

    def __init__(self, alias: str, trigger_ttl_ms: int = 60_000) -> None:
        self.alias = alias
        #: a manual-run request not taken within this long is dropped, never run
        self.trigger_ttl_ms = trigger_ttl_ms
        self.stale_manual_ms = int(STALE_MANUAL_AFTER * 1000)  # see trigger_rules
        self.tables = StoreTables(alias)
        self.control = ControlOperations(self.tables, self._take)
        self.lone = LoneClaim(self.tables, self.control.version)

    def now(self) -> int:
        """The database clock, epoch ms."""
        return self.tables.now()

    # -- registration and claims -----------------------------------------------------------

    def register(self, jobs: Sequence[JobSpec]) -> None:
        """Insert new jobs (first seen now), update the kind and schedule of known ones."""
        with transaction.atomic(using=self.alias):
            self.tables.sqlite_write_lock()
            now = self.now()
            names = [job.name for job in jobs]
            known = set(self.tables.jobs().select_for_update().filter(name__in=names)
                        .values_list("name", flat=True))
            for job in jobs:
                if job.name in known:
                    self.tables.jobs().filter(name=job.name).update(
                        kind=stored_kind(job), schedule=job.schedule, updated=now)
            self.tables.jobs().bulk_create(
                [StoreJob(name=job.name, kind=stored_kind(job), schedule=job.schedule,
                          first_seen=now, updated=now)
                 for job in jobs if job.name not in known],
                ignore_conflicts=True)

    def claim(self, req: ClaimRequest) -> ClaimResult:
        """Judge one claim by [`ClaimRequest`][anarchon.backends.base.ClaimRequest]'s rules, in one
        transaction."""
        with transaction.atomic(using=self.alias):
            job = self.tables.lock_job(req.name)
            return self.lone.judge(req, job, self.now())

    def claim_many(self, requests: Sequence[ClaimRequest]) -> list[ClaimResult]:
        """Judge every request as [`claim`][anarchon_django.store.operations.Store.claim]
        would, in list order, in one transaction at one store time. The batch's job rows
        are locked first, in name order, so two instances' batches never deadlock on
        them (a lone claim locks one); then, round by round, new slots of registered jobs
        are judged together (``claim_rounds``), the rest one by one. The caller has
        validated the requests."""
        if not requests:
            return []
        with transaction.atomic(using=self.alias):
            self.tables.sqlite_write_lock()
            names = sorted({req.name for req in requests})
            jobs: dict[str, StoreJob] = {
                job.name: job for job in self.tables.jobs().select_for_update()
                .filter(name__in=names).order_by("name")}
            versions = self.control.versions(names)
            now = self.now()
            return judge_batch(self.tables, self.lone, requests, jobs, versions, now)

    def confirm(self, req: ClaimRequest) -> int:
        """The attempt ``req.owner`` holds on the slot, else 0."""
        run = self.tables.runs().filter(job=req.name, slot=req.slot).first()
        if run is not None and run.owner == req.owner and run.state == "running":
            return int(run.attempt)
        return 0

    # -- leases ----------------------------------------------------------------------------

    def heartbeat(self, owner: str, held: Sequence[HeldRun], watched: Sequence[RunKey],
                  lease_ms: int) -> HeartbeatResult:
        """Renew the held leases (fenced) and read the watched runs, in one transaction
        (set by set: ``heartbeat_rounds``)."""
        return heartbeat_rounds.heartbeat(self.tables, owner, held, watched, lease_ms)

    def _fenced(self, owner: str, run: HeldRun) -> Any:
        return self.tables.runs().filter(job=run.name, slot=run.slot, owner=owner,
                                         attempt=run.attempt, state="running")

    def release(self, owner: str, run: HeldRun) -> bool:
        """Hand ``run`` over: its lease ends now, its attempt is interrupted (fenced)."""
        with transaction.atomic(using=self.alias):
            self.tables.sqlite_write_lock()
            now = self.now()
            if not self._fenced(owner, run).update(lease_until=now, handed_over=True):
                return False
            self.tables.end_attempt(run.name, run.slot, run.attempt, "interrupted", None, now)
            return True

    def note(self, owner: str, run: HeldRun, text: str) -> bool:
        """``text`` as the running attempt's error, if ``(owner, attempt)`` holds it."""
        with transaction.atomic(using=self.alias):
            self.tables.sqlite_write_lock()
            if not self._fenced(owner, run).filter(handed_over=False).select_for_update(
                    ).exists():
                return False
            return bool(self.tables.attempts().filter(
                job=run.name, slot=run.slot, attempt=run.attempt, manual=False,
                status="running").update(error=text))

    def unfinished(self, names: Sequence[str]) -> list[RunState]:
        """Runs of these jobs still marked running."""
        now = self.now()
        return [RunState(run.job, run.slot, run.owner, run.attempt, True,
                         run.lease_until <= now, run.handed_over)
                for run in self.tables.runs().filter(state="running", job__in=list(names))]

    # -- outcomes and history --------------------------------------------------------------

    def finish(self, finish: Finish) -> bool:
        """Record an attempt's outcome (fenced), prune history and old runs."""
        return self.finish_many([finish])[0]

    def finish_many(self, finishes: Sequence[Finish]) -> list[bool]:
        """Record every outcome as ``finish`` would, in one transaction at one store time,
        with a few bulk statements (``anarchon_django.store.finish_rounds``); one answer
        per finish, in list order (a second finish of one run sees the first). The
        batch's runs are locked in job order, as claims lock them. The caller has
        validated them."""
        if not finishes:
            return []
        with transaction.atomic(using=self.alias):
            self.tables.sqlite_write_lock()
            return finish_batch(self.tables, finishes, self.now())

    def start_manual(self, name: str, owner: str, started_ms: int) -> str:
        """A running manual attempt; its id is the token."""
        attempt = self.tables.attempts().create(
            job=name, slot=started_ms, attempt=1, instance=owner, manual=True, reason="manual",
            status="running", started_at=self.now())
        return str(attempt.pk)

    def finish_manual(self, token: str, status: RunStatus, error: str | None,
                      history_size: int, history_ttl_ms: int | None) -> None:
        """Record a manual run's outcome and prune its job's history."""
        with transaction.atomic(using=self.alias):
            self.tables.sqlite_write_lock()
            now = self.now()
            rows = self.tables.attempts().filter(pk=int(token))
            name = rows.values_list("job", flat=True).first()
            rows.update(status=status, error=error, finished_at=now)
            if name is not None:
                bound_history(self.tables, {name: (history_size, history_ttl_ms)}, now)

    def history(self, name: str, count: int) -> list[RunRecord]:
        """Newest-first attempts of ``name``."""
        rows = self.tables.attempts().filter(job=name).order_by("-started_at", "-id")[:count]
        return readable(rows, record, self.tables.where(StoreAttempt), _row)

    def known_jobs(self) -> list[JobSpec]:
        """Every registered job, by name."""
        return readable(self.tables.jobs().order_by("name"),
                        lambda job: stored_spec(job.name, job.kind, job.schedule, job.updated),
                        self.tables.where(StoreJob), _row)

    def request_trigger(self, name: str, data: str | None, exclusive: bool = False,
                        wait: float | None = None) -> str:
        """Store a manual-run request; its id. With ``exclusive``, raise
        ``TriggerRefusedError`` while one of ``name`` is pending or running (checked and
        stored in one transaction, under the job row's lock; ``wait``: at most this many
        seconds for that lock, see ``StoreTables.bounded``)."""
        with transaction.atomic(using=self.alias):
            self.tables.lock_job(name, wait)
            blocked = self._blocked(name) if exclusive else None
            if blocked is not None:
                raise refused(name, blocked)
            trigger = self.tables.triggers().create(job=name, data=data, requested_at=self.now())
        return str(trigger.pk)

    def take_triggers(self, names: Sequence[str]) -> list[TriggerRequest]:
        """Take (delete) the pending requests for ``names``; one read when none.

        Requests older than ``trigger_ttl_ms`` are deleted, not returned."""
        if not self.tables.triggers().exists():
            return []
        return self._take(names)

    def _take(self, names: Sequence[str]) -> list[TriggerRequest]:
        with transaction.atomic(using=self.alias):
            self.tables.sqlite_write_lock()
            triggers = self.tables.triggers
            triggers().filter(requested_at__lt=self.now() - self.trigger_ttl_ms).delete()
            rows = list(triggers().select_for_update().filter(job__in=list(names))
                        .order_by("id").values_list("id", "job", "data"))
            triggers().filter(id__in=[row[0] for row in rows]).delete()
        return [TriggerRequest(str(ident), job, data) for ident, job, data in rows]

    def manual_pending(self, name: str) -> str | None:
        """Why a new manual run of ``name`` must wait (a live request, a running manual
        attempt), or None."""
        blocked = self._blocked(name)
        return None if blocked is None else REASONS[blocked]

    def _blocked(self, name: str) -> Refusal | None:
        now = self.now()
        if self.tables.triggers().filter(
                job=name, requested_at__gte=now - self.trigger_ttl_ms).exists():
            return "pending"
        if self.tables.attempts().filter(
                job=name, manual=True, status="running",
                started_at__gte=now - self.stale_manual_ms).exists():
            return "running"
        return None

    def last_seen(self, name: str) -> int | None:
        """The newest registration or attempt start of ``name`` (epoch ms), or None."""
        registered = self.tables.jobs().filter(name=name).values_list("updated", flat=True).first()
        started = (self.tables.attempts().filter(job=name).order_by("-started_at")
                   .values_list("started_at", flat=True).first())
        times = [t for t in (registered, started) if t is not None]
        return max(times) if times else None

    def read_value(self, name: str, field: str) -> str | None:
        """The shared value under ``(name, field)``, or None."""
        value: str | None = (self.tables.values().filter(job=name, field=field)
                             .values_list("value", flat=True).first())
        return value

    def swap_value(self, name: str, field: str, expected: str | None, value: str) -> bool:
        """Compare-and-set. The comparison is made in Python on the locked row: MySQL's
        default collations compare text case- and trailing-space-insensitively."""
        with transaction.atomic(using=self.alias):
            self.tables.sqlite_write_lock()
            row = self.tables.values().select_for_update().filter(job=name, field=field).first()
            if row is None:
                if expected is not None:
                    return False
                try:
                    with transaction.atomic(using=self.alias):
                        self.tables.values().create(job=name, field=field, value=value)
                except IntegrityError:
                    return False  # another instance stored the first value meanwhile
                return True
            if expected is None or row.value != expected:
                return False
            self.tables.values().filter(pk=row.pk).update(value=value)
            return True

    def purge(self) -> int:
        """Delete every row of the store but the generation (raised); how many."""
        with self.control.locked():
            tables = self.tables
            return sum(int(rows.all().delete()[0]) for rows in (
                # claims lock the job's row first: so does this (no deadlock with one)
                tables.jobs(), tables.runs(), tables.attempts(), tables.triggers())
            ) + self.control.purge()

    def forget(self, name: str, wait: float | None = None) -> int:
        """Delete every row of job ``name``; how many were deleted. The job row is
        locked first, as a claim locks it (``wait``: at most this many seconds)."""
        with transaction.atomic(using=self.alias):
            tables = self.tables
            tables.lock_job(name, wait)
            return sum(rows.filter(**{field: name}).delete()[0] for rows, field in (
                (tables.triggers(), "job"), (tables.attempts(), "job"), (tables.runs(), "job"),
                (tables.values(), "job"), (tables.jobs(), "name")))

    # -- runtime control (``control``) -----------------------------------------------------

    def poll(self, names: Sequence[str]) -> Poll:
        """``ControlOperations.poll``: the generation, the pending triggers taken."""
        return self.control.poll(names)

    def read_controls(self) -> ControlSnapshot:
        """``ControlOperations.read_controls``: one generation's records and offers."""
        return self.control.read_controls()

    def peek_controls(self) -> ControlSnapshot:
        """``ControlOperations.peek_controls``: ``read_controls()`` without a lock."""
        return self.control.peek_controls()

    def change_control(self, change: ControlChange, wait: float | None = None) -> int:
        """``ControlOperations.change_control``: compare-and-set; the new version, or 0."""
        return self.control.change_control(change, wait)

    def change_log(self, name: str, count: int) -> list[str]:
        """``ControlOperations.change_log``: the newest entries, newest first."""
        return self.control.change_log(name, count)

    def offer_handlers(self, instance_id: str, handlers: Sequence[str]) -> None:
        """``ControlOperations.offer_handlers``: replace (or withdraw) the offer."""
        self.control.offer_handlers(instance_id, handlers)


def record(row: StoreAttempt) -> RunRecord:
    """A history row as the core's [`RunRecord`][anarchon.history.RunRecord]."""
    finished = row.finished_at
    return checked(RunRecord(
        name=row.job, slot=row.slot, scheduled_at=ms_datetime(row.slot),
        instance_id=row.instance, manual=row.manual, attempt=row.attempt,
        reason=row.reason,  # type: ignore[arg-type, unused-ignore]
        status=row.status,  # type: ignore[arg-type, unused-ignore]
        started_at=ms_datetime(row.started_at),
        finished_at=ms_datetime(finished) if finished is not None else None,
        duration=(finished - row.started_at) / 1000 if finished is not None else None,
        error=row.error))


def _row(row: Any) -> str:
    """A model row, for the log: its primary key and fields (``Model._meta`` is
    Django's documented model metadata API)."""
    return f"pk {row.pk!r}: " + ", ".join(
        f"{f.attname}={getattr(row, f.attname)!r}" for f in row._meta.concrete_fields)
