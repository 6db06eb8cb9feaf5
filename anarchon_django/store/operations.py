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

from django.db import IntegrityError, connections, transaction
from django.db.models import F

from anarchon.backends.base import (
    EARLY_TOLERANCE_MS,
    ClaimOutcome,
    ClaimRequest,
    ClaimResult,
    Finish,
    HeartbeatResult,
    HeldRun,
    JobSpec,
    RunKey,
    RunState,
    TriggerRequest,
)
from anarchon.backends.frameworks import stored_kind, stored_spec
from anarchon.backends.trigger_rules import REASONS, STALE_MANUAL_AFTER, Refusal, refused
from anarchon.history import RunRecord, RunStatus
from anarchon.slots import ms_to_datetime

from . import heartbeat_rounds
from .claim_rounds import judge_batch
from .control import ControlOperations
from .finish_rounds import bound_history, finish_batch
from .models import StoreAttempt, StoreJob, StoreRun, StoreTrigger, StoreValue
from .worker import database_ms


class Store(ControlOperations):
    """Store operations on database ``alias``; call them in the thread that owns it."""

    def __init__(self, alias: str, trigger_ttl_ms: int = 60_000) -> None:
        self.alias = alias
        #: a manual-run request not taken within this long is dropped, never run
        self.trigger_ttl_ms = trigger_ttl_ms
        self.stale_manual_ms = int(STALE_MANUAL_AFTER * 1000)  # see trigger_rules

    # -- plumbing --------------------------------------------------------------------------

    def now(self) -> int:
        """The database clock, epoch ms."""
        return database_ms(self.alias)

    def _jobs(self) -> Any:
        return StoreJob.objects.using(self.alias)

    def _runs(self) -> Any:
        return StoreRun.objects.using(self.alias)

    def _attempts(self) -> Any:
        return StoreAttempt.objects.using(self.alias)

    def _triggers(self) -> Any:
        return StoreTrigger.objects.using(self.alias)

    def _values(self) -> Any:
        return StoreValue.objects.using(self.alias)

    def _sqlite_write_lock(self) -> None:
        """On SQLite, begin the transaction with a write (see the module doc)."""
        if connections[self.alias].vendor == "sqlite":
            self._jobs().filter(name="").update(updated=F("updated"))

    def _lock_job(self, name: str) -> StoreJob | None:
        self._sqlite_write_lock()
        job: StoreJob | None = self._jobs().select_for_update().filter(name=name).first()
        return job

    # -- registration and claims -----------------------------------------------------------

    def register(self, jobs: Sequence[JobSpec]) -> None:
        """Insert new jobs (first seen now), update the kind and schedule of known ones."""
        with transaction.atomic(using=self.alias):
            self._sqlite_write_lock()
            now = self.now()
            names = [job.name for job in jobs]
            known = set(self._jobs().select_for_update().filter(name__in=names)
                        .values_list("name", flat=True))
            for job in jobs:
                if job.name in known:
                    self._jobs().filter(name=job.name).update(
                        kind=stored_kind(job), schedule=job.schedule, updated=now)
            self._jobs().bulk_create(
                [StoreJob(name=job.name, kind=stored_kind(job), schedule=job.schedule,
                          first_seen=now, updated=now)
                 for job in jobs if job.name not in known],
                ignore_conflicts=True)

    def claim(self, req: ClaimRequest) -> ClaimResult:
        """Judge one claim by [`ClaimRequest`][anarchon.backends.base.ClaimRequest]'s rules, in one
        transaction."""
        with transaction.atomic(using=self.alias):
            job = self._lock_job(req.name)
            return self._judge(req, job, self.now())

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
            self._sqlite_write_lock()
            names = sorted({req.name for req in requests})
            jobs: dict[str, StoreJob] = {
                job.name: job for job in self._jobs().select_for_update()
                .filter(name__in=names).order_by("name")}
            versions = self.control_versions(names)
            now = self.now()
            return judge_batch(self, requests, jobs, versions, now)

    def _judge(self, req: ClaimRequest, job: StoreJob | None, now: int,
               version: int | None = None) -> ClaimResult:
        """One claim, inside the caller's transaction holding the job's row (and, when
        ``version`` is given, the job's control row, read into it)."""

        def result(outcome: ClaimOutcome, attempt: int = 0) -> ClaimResult:
            return ClaimResult(outcome, attempt, now)

        run: StoreRun | None = (self._runs().select_for_update()
                                .filter(job=req.name, slot=req.slot).first())
        if req.reason == "takeover":
            return self._takeover(req, run, now)
        if req.slot - now > EARLY_TOLERANCE_MS:
            return result("early")
        if (self.control_version(req.name) if version is None else version) > req.version:
            return result("stale")
        if req.reason == "scheduled" and now > req.slot + req.max_late_ms:
            return result("late")
        if req.reason == "catch-up" and (
                job is None or (job.first_seen >= req.slot and not req.one_off)
                or req.slot <= now - req.catch_up_ms):
            return result("late")
        if run is not None:
            return result("taken")
        expired = list(self._runs().select_for_update().filter(
            job=req.name, state="running", lease_until__lte=now,
        ).exclude(slot=req.slot).values_list("slot", "attempt"))
        for slot, attempt in expired:
            self._runs().filter(job=req.name, slot=slot).update(state="interrupted")
            self._end_attempt(req.name, slot, attempt, "interrupted", None, now)
        overlapping = (req.overlap == "skip" and self._runs().filter(
            job=req.name, state="running").exclude(slot=req.slot).exists())
        row = {"job": req.name, "slot": req.slot, "owner": req.owner,
               "state": "skipped" if overlapping else "running",
               "attempt": 0 if overlapping else 1, "counted": 0 if overlapping else 1,
               "lease_until": 0 if overlapping else now + req.lease_ms}
        if job is not None:
            # the job's row is locked: no other claim of this job can insert meanwhile,
            # and the run was read as missing above
            self._runs().create(**row)
        else:
            try:  # a job nobody registered: the unique (job, slot) settles it
                with transaction.atomic(using=self.alias):
                    self._runs().create(**row)
            except IntegrityError:
                return result("taken")
        if overlapping:
            return result("overlap")
        self._start_attempt(req, 1, now)
        return result("won", 1)

    def _takeover(self, req: ClaimRequest, run: StoreRun | None, now: int) -> ClaimResult:
        if (run is None or run.state != "running" or run.attempt != req.expected_attempt
                or run.lease_until > now):
            return ClaimResult("taken", 0, now)
        self._end_attempt(req.name, req.slot, run.attempt, "interrupted", None, now)
        rows = self._runs().filter(pk=run.pk)
        if not run.handed_over and run.counted >= req.max_attempts:
            rows.update(state="interrupted")
            return ClaimResult("exhausted", 0, now)
        rows.update(owner=req.owner, attempt=F("attempt") + 1,
                    counted=F("counted") + (0 if run.handed_over else 1),
                    handed_over=False, lease_until=now + req.lease_ms)
        self._start_attempt(req, run.attempt + 1, now)
        return ClaimResult("won", run.attempt + 1, now)

    def _start_attempt(self, req: ClaimRequest, attempt: int, now: int) -> None:
        self._attempts().create(job=req.name, slot=req.slot, attempt=attempt,
                                instance=req.owner, manual=False, reason=req.reason,
                                status="running", started_at=now)

    def _end_attempt(self, name: str, slot: int, attempt: int, status: str,
                     error: str | None, now: int) -> None:
        self._attempts().filter(job=name, slot=slot, attempt=attempt, manual=False,
                                status="running").update(
            status=status, error=error, finished_at=now)

    def confirm(self, req: ClaimRequest) -> int:
        """The attempt ``req.owner`` holds on the slot, else 0."""
        run = self._runs().filter(job=req.name, slot=req.slot).first()
        if run is not None and run.owner == req.owner and run.state == "running":
            return int(run.attempt)
        return 0

    # -- leases ----------------------------------------------------------------------------

    def heartbeat(self, owner: str, held: Sequence[HeldRun], watched: Sequence[RunKey],
                  lease_ms: int) -> HeartbeatResult:
        """Renew the held leases (fenced) and read the watched runs, in one transaction
        (set by set: ``heartbeat_rounds``)."""
        return heartbeat_rounds.heartbeat(self, owner, held, watched, lease_ms)

    def _fenced(self, owner: str, run: HeldRun) -> Any:
        return self._runs().filter(job=run.name, slot=run.slot, owner=owner,
                                   attempt=run.attempt, state="running")

    def release(self, owner: str, run: HeldRun) -> bool:
        """Hand ``run`` over: its lease ends now, its attempt is interrupted (fenced)."""
        with transaction.atomic(using=self.alias):
            self._sqlite_write_lock()
            now = self.now()
            if not self._fenced(owner, run).update(lease_until=now, handed_over=True):
                return False
            self._end_attempt(run.name, run.slot, run.attempt, "interrupted", None, now)
            return True

    def note(self, owner: str, run: HeldRun, text: str) -> bool:
        """``text`` as the running attempt's error, if ``(owner, attempt)`` holds it."""
        with transaction.atomic(using=self.alias):
            self._sqlite_write_lock()
            if not self._fenced(owner, run).filter(handed_over=False).select_for_update(
                    ).exists():
                return False
            return bool(self._attempts().filter(
                job=run.name, slot=run.slot, attempt=run.attempt, manual=False,
                status="running").update(error=text))

    def unfinished(self, names: Sequence[str]) -> list[RunState]:
        """Runs of these jobs still marked running."""
        now = self.now()
        return [RunState(run.job, run.slot, run.owner, run.attempt, True,
                         run.lease_until <= now, run.handed_over)
                for run in self._runs().filter(state="running", job__in=list(names))]

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
            self._sqlite_write_lock()
            return finish_batch(self, finishes, self.now())

    def start_manual(self, name: str, owner: str, started_ms: int) -> str:
        """A running manual attempt; its id is the token."""
        attempt = self._attempts().create(job=name, slot=started_ms, attempt=1, instance=owner,
                                          manual=True, reason="manual", status="running",
                                          started_at=self.now())
        return str(attempt.pk)

    def finish_manual(self, token: str, status: RunStatus, error: str | None,
                      history_size: int, history_ttl_ms: int | None) -> None:
        """Record a manual run's outcome and prune its job's history."""
        with transaction.atomic(using=self.alias):
            self._sqlite_write_lock()
            now = self.now()
            rows = self._attempts().filter(pk=int(token))
            name = rows.values_list("job", flat=True).first()
            rows.update(status=status, error=error, finished_at=now)
            if name is not None:
                bound_history(self, {name: (history_size, history_ttl_ms)}, now)

    def history(self, name: str, count: int) -> list[RunRecord]:
        """Newest-first attempts of ``name``."""
        rows = self._attempts().filter(job=name).order_by("-started_at", "-id")[:count]
        return [record(row) for row in rows]

    def known_jobs(self) -> list[JobSpec]:
        """Every registered job, by name."""
        return [stored_spec(job.name, job.kind, job.schedule, job.updated)
                for job in self._jobs().order_by("name")]

    def request_trigger(self, name: str, data: str | None, exclusive: bool = False) -> str:
        """Store a manual-run request; its id. With ``exclusive``, raise
        ``TriggerRefusedError`` while one of ``name`` is pending or running (checked and
        stored in one transaction, under the job row's lock)."""
        with transaction.atomic(using=self.alias):
            self._lock_job(name)
            blocked = self._blocked(name) if exclusive else None
            if blocked is not None:
                raise refused(name, blocked)
            trigger = self._triggers().create(job=name, data=data, requested_at=self.now())
        return str(trigger.pk)

    def take_triggers(self, names: Sequence[str]) -> list[TriggerRequest]:
        """Take (delete) the pending requests for ``names``; one read when none.

        Requests older than ``trigger_ttl_ms`` are deleted, not returned."""
        if not self._triggers().exists():
            return []
        return self._take(names)

    def _take(self, names: Sequence[str]) -> list[TriggerRequest]:
        with transaction.atomic(using=self.alias):
            self._sqlite_write_lock()
            self._triggers().filter(requested_at__lt=self.now() - self.trigger_ttl_ms).delete()
            rows = list(self._triggers().select_for_update().filter(job__in=list(names))
                        .order_by("id").values_list("id", "job", "data"))
            self._triggers().filter(id__in=[row[0] for row in rows]).delete()
        return [TriggerRequest(str(ident), job, data) for ident, job, data in rows]

    def manual_pending(self, name: str) -> str | None:
        """Why a new manual run of ``name`` must wait (a live request, a running manual
        attempt), or None."""
        blocked = self._blocked(name)
        return None if blocked is None else REASONS[blocked]

    def _blocked(self, name: str) -> Refusal | None:
        now = self.now()
        if self._triggers().filter(job=name,
                                   requested_at__gte=now - self.trigger_ttl_ms).exists():
            return "pending"
        if self._attempts().filter(job=name, manual=True, status="running",
                                   started_at__gte=now - self.stale_manual_ms).exists():
            return "running"
        return None

    def last_seen(self, name: str) -> int | None:
        """The newest registration or attempt start of ``name`` (epoch ms), or None."""
        registered = self._jobs().filter(name=name).values_list("updated", flat=True).first()
        started = (self._attempts().filter(job=name).order_by("-started_at")
                   .values_list("started_at", flat=True).first())
        times = [t for t in (registered, started) if t is not None]
        return max(times) if times else None

    def read_value(self, name: str, field: str) -> str | None:
        """The shared value under ``(name, field)``, or None."""
        value: str | None = (self._values().filter(job=name, field=field)
                             .values_list("value", flat=True).first())
        return value

    def swap_value(self, name: str, field: str, expected: str | None, value: str) -> bool:
        """Compare-and-set. The comparison is made in Python on the locked row: MySQL's
        default collations compare text case- and trailing-space-insensitively."""
        with transaction.atomic(using=self.alias):
            self._sqlite_write_lock()
            row = self._values().select_for_update().filter(job=name, field=field).first()
            if row is None:
                if expected is not None:
                    return False
                try:
                    with transaction.atomic(using=self.alias):
                        self._values().create(job=name, field=field, value=value)
                except IntegrityError:
                    return False  # another instance stored the first value meanwhile
                return True
            if expected is None or row.value != expected:
                return False
            self._values().filter(pk=row.pk).update(value=value)
            return True

    def purge(self) -> int:
        """Delete every row of the store but the generation (raised); how many."""
        with self._locked():
            return sum(int(rows.all().delete()[0]) for rows in (
                # claims lock the job's row first: so does this (no deadlock with one)
                self._jobs(), self._runs(), self._attempts(), self._triggers())
            ) + self.purge_control()

    def forget(self, name: str) -> int:
        """Delete every row of job ``name``; how many were deleted."""
        with transaction.atomic(using=self.alias):
            self._sqlite_write_lock()
            return sum(rows.filter(**{field: name}).delete()[0] for rows, field in (
                (self._triggers(), "job"), (self._attempts(), "job"), (self._runs(), "job"),
                (self._values(), "job"), (self._jobs(), "name")))


def record(row: StoreAttempt) -> RunRecord:
    """A history row as the core's [`RunRecord`][anarchon.history.RunRecord]."""
    finished = row.finished_at
    return RunRecord(
        name=row.job, slot=row.slot, scheduled_at=ms_to_datetime(row.slot),
        instance_id=row.instance, manual=row.manual, attempt=row.attempt,
        reason=row.reason,  # type: ignore[arg-type, unused-ignore]
        status=row.status,  # type: ignore[arg-type, unused-ignore]
        started_at=ms_to_datetime(row.started_at),
        finished_at=ms_to_datetime(finished) if finished is not None else None,
        duration=(finished - row.started_at) / 1000 if finished is not None else None,
        error=row.error)
