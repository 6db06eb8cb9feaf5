"""A batch's new-slot claims judged set by set: a few statements per round, not per claim.

[`Store.claim_many`][anarchon_django.store.operations.Store.claim_many] cuts a batch
into rounds (each job at most once per round, ``anarchon.backends.batches.rounds``).
Within a round, the claims of registered jobs for new slots are judged by the rules of a
lone claim with one read of the round's existing runs, one locked read of the round's
jobs' running runs, and two bulk inserts (runs, then the winners' attempts). Takeovers
and claims of jobs nobody registered go one by one, as a lone claim does.
"""

from __future__ import annotations

from collections.abc import Sequence

from anarchon.backends.base import ClaimOutcome, ClaimRequest, ClaimResult
from anarchon.backends.batches import rounds
from anarchon.backends.claim_rules import refusal

from .lone_claim import LoneClaim
from .models import StoreAttempt, StoreJob, StoreRun
from .tables import StoreTables


def judge_batch(tables: StoreTables, lone: LoneClaim, requests: Sequence[ClaimRequest],
                jobs: dict[str, StoreJob], versions: dict[str, int], now: int
                ) -> list[ClaimResult]:
    """Every request's answer, in list order, judged round by round inside the caller's
    transaction, which holds the rows of ``jobs`` (the registered ones of the batch) and
    their control rows (``versions``); the claims not judged set by set go to ``lone``."""
    answers: dict[int, ClaimResult] = {}
    for positions in rounds(requests, lambda req: req.name):
        together = [p for p in positions
                    if requests[p].reason != "takeover" and requests[p].name in jobs]
        for p in sorted(set(positions) - set(together)):
            answers[p] = lone.judge(requests[p], jobs.get(requests[p].name), now,
                                    versions.get(requests[p].name, 0))
        first_seen = {requests[p].name: jobs[requests[p].name].first_seen for p in together}
        judged = claim_round(tables, [requests[p] for p in together], first_seen, versions, now)
        answers.update(zip(together, judged, strict=True))
    return [answers[p] for p in range(len(requests))]


def claim_round(tables: StoreTables, requests: Sequence[ClaimRequest],
                first_seen: dict[str, int], versions: dict[str, int], now: int
                ) -> list[ClaimResult]:
    """Judge ``requests`` (distinct registered jobs, no takeovers; their job rows locked
    by the caller's transaction), answers in their order."""
    outcomes: list[ClaimOutcome | None] = [
        refusal(req, first_seen[req.name], versions.get(req.name, 0), now) for req in requests]
    open_ = [i for i, outcome in enumerate(outcomes) if outcome is None]
    if open_:
        _judge_open(tables, requests, open_, outcomes, now)
    return [ClaimResult(outcome or "taken", 1 if outcome == "won" else 0, now)
            for outcome in outcomes]


def _judge_open(tables: StoreTables, requests: Sequence[ClaimRequest], open_: list[int],
                outcomes: list[ClaimOutcome | None], now: int) -> None:
    names = [requests[i].name for i in open_]
    pairs = {(requests[i].name, requests[i].slot) for i in open_}
    # the job rows are locked: no claim of these jobs can add a run meanwhile
    existing = {(job, slot) for job, slot in tables.runs().filter(
        job__in=names, slot__in=[slot for _, slot in pairs]).values_list("job", "slot")
        if (job, slot) in pairs}
    running: dict[str, list[tuple[int, int, int]]] = {}
    fresh = [i for i in open_ if (requests[i].name, requests[i].slot) not in existing]
    if fresh:
        # as a lone claim: read the running runs, lock only the expired ones (in job
        # order, as finishes take them), so a claim batch never waits on live runs
        for job, slot, attempt, lease_until in tables.runs().filter(
                job__in=[requests[i].name for i in fresh], state="running").values_list(
                "job", "slot", "attempt", "lease_until"):
            running.setdefault(job, []).append((slot, attempt, lease_until))
        expired = [(job, slot) for job, runs_ in running.items()
                   for slot, _, until in runs_ if until <= now]
        if expired:
            locked = set(tables.runs().select_for_update().filter(
                job__in=[job for job, _ in expired], state="running",
                lease_until__lte=now).order_by("job", "slot").values_list("job", "slot"))
            running = {job: [run for run in runs_ if run[2] > now or (job, run[0]) in locked]
                       for job, runs_ in running.items()}
    runs: list[StoreRun] = []
    attempts: list[StoreAttempt] = []
    for i in open_:
        req = requests[i]
        if (req.name, req.slot) in existing:
            outcomes[i] = "taken"
            continue
        others = [run for run in running.get(req.name, []) if run[0] != req.slot]
        for slot, attempt, _ in (run for run in others if run[2] <= now):
            tables.runs().filter(job=req.name, slot=slot).update(state="interrupted")
            tables.end_attempt(req.name, slot, attempt, "interrupted", None, now)
        overlapping = req.overlap == "skip" and any(run[2] > now for run in others)
        runs.append(StoreRun(job=req.name, slot=req.slot, owner=req.owner,
                             state="skipped" if overlapping else "running",
                             attempt=0 if overlapping else 1, counted=0 if overlapping else 1,
                             handed_over=False,
                             lease_until=0 if overlapping else now + req.lease_ms))
        outcomes[i] = "overlap" if overlapping else "won"
        if not overlapping:
            attempts.append(StoreAttempt(job=req.name, slot=req.slot, attempt=1,
                                         instance=req.owner, manual=False, reason=req.reason,
                                         status="running", started_at=now))
    tables.runs().bulk_create(runs)
    tables.attempts().bulk_create(attempts)
