"""LoneClaim: one claim judged by [`ClaimRequest`][anarchon.backends.base.ClaimRequest]'s
rules (``anarchon.backends.claim_rules``) on the ``"django"`` store's rows.

A lone claim, a takeover and the claims of a batch that are not judged set by set
(``anarchon_django.store.claim_rounds``) go through here, inside the caller's
transaction, which already holds the job's row (``StoreTables.lock_job``). The run's row
is locked next, then the job's control row (the version fence) unless the caller read
it already; a job nobody registered has no row to lock, and the unique ``(job, slot)``
settles two claims of one of its slots.
"""

from __future__ import annotations

from collections.abc import Callable

from django.db import IntegrityError, transaction
from django.db.models import F

from anarchon.backends.base import ClaimOutcome, ClaimRequest, ClaimResult
from anarchon.backends.claim_rules import exhausted, refusal, takeover_open

from .models import StoreJob, StoreRun
from .tables import StoreTables


class LoneClaim:
    """Judges one claim at a time on ``tables``; ``fence(name)`` is job ``name``'s
    control version, its row locked (``ControlOperations.version``)."""

    def __init__(self, tables: StoreTables, fence: Callable[[str], int]) -> None:
        self.tables = tables
        self.fence = fence

    def judge(self, req: ClaimRequest, job: StoreJob | None, now: int,
              version: int | None = None) -> ClaimResult:
        """One claim, inside the caller's transaction holding the job's row (and, when
        ``version`` is given, the job's control row, read into it)."""

        def result(outcome: ClaimOutcome, attempt: int = 0) -> ClaimResult:
            return ClaimResult(outcome, attempt, now)

        runs = self.tables.runs
        run: StoreRun | None = (runs().select_for_update()
                                .filter(job=req.name, slot=req.slot).first())
        if req.reason == "takeover":
            return self._takeover(req, run, now)
        why = refusal(req, None if job is None else job.first_seen,
                      self.fence(req.name) if version is None else version, now)
        if why is not None:
            return result(why)
        if run is not None:
            return result("taken")
        expired = list(runs().select_for_update().filter(
            job=req.name, state="running", lease_until__lte=now,
        ).exclude(slot=req.slot).values_list("slot", "attempt"))
        for slot, attempt in expired:
            runs().filter(job=req.name, slot=slot).update(state="interrupted")
            self.tables.end_attempt(req.name, slot, attempt, "interrupted", None, now)
        overlapping = (req.overlap == "skip" and runs().filter(
            job=req.name, state="running").exclude(slot=req.slot).exists())
        row = {"job": req.name, "slot": req.slot, "owner": req.owner,
               "state": "skipped" if overlapping else "running",
               "attempt": 0 if overlapping else 1, "counted": 0 if overlapping else 1,
               "lease_until": 0 if overlapping else now + req.lease_ms}
        if job is not None:
            # the job's row is locked: no other claim of this job can insert meanwhile,
            # and the run was read as missing above
            runs().create(**row)
        else:
            try:  # a job nobody registered: the unique (job, slot) settles it
                with transaction.atomic(using=self.tables.alias):
                    runs().create(**row)
            except IntegrityError:
                return result("taken")
        if overlapping:
            return result("overlap")
        self._start_attempt(req, 1, now)
        return result("won", 1)

    def _takeover(self, req: ClaimRequest, run: StoreRun | None, now: int) -> ClaimResult:
        if run is None or not takeover_open(req, run.state == "running", run.attempt,
                                            run.lease_until, now):
            return ClaimResult("taken", 0, now)
        self.tables.end_attempt(req.name, req.slot, run.attempt, "interrupted", None, now)
        rows = self.tables.runs().filter(pk=run.pk)
        if exhausted(req, run.counted, run.handed_over):
            rows.update(state="interrupted")
            return ClaimResult("exhausted", 0, now)
        rows.update(owner=req.owner, attempt=F("attempt") + 1,
                    counted=F("counted") + (0 if run.handed_over else 1),
                    handed_over=False, lease_until=now + req.lease_ms)
        self._start_attempt(req, run.attempt + 1, now)
        return ClaimResult("won", run.attempt + 1, now)

    def _start_attempt(self, req: ClaimRequest, attempt: int, now: int) -> None:
        self.tables.attempts().create(job=req.name, slot=req.slot, attempt=attempt,
                                      instance=req.owner, manual=False, reason=req.reason,
                                      status="running", started_at=now)


__all__ = ["LoneClaim"]
