"""A batch of finishes recorded set by set: a few statements per batch, not per finish.

[`Store.finish_many`][anarchon_django.store.operations.Store.finish_many] records every
outcome of a batch inside one transaction:

* one locked read of the batch's runs (``select_for_update``, in job and slot order, the
  order claims lock runs in);
* the fences decided from that read in list order, as finishes one by one would decide
  them (a second finish of one run sees the first);
* the winners written with bulk statements: the runs marked done in one statement, the
  attempts' ends in one statement per distinct outcome (every success of the batch in
  one), each job's history bounded once, and old runs deleted in one statement.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from django.db.models import F, Q, Window
from django.db.models.functions import RowNumber

from anarchon.backends.base import Finish

from .tables import StoreTables

#: finishes per locked read (bounds the statements' parameter counts)
CHUNK = 200


@dataclass
class _Run:
    ident: int
    owner: str
    attempt: int
    running: bool


def finish_batch(tables: StoreTables, finishes: Sequence[Finish], now: int) -> list[bool]:
    """One answer per finish, in list order, recorded inside the caller's transaction."""
    answers: list[bool] = []
    for start in range(0, len(finishes), CHUNK):
        answers += _finish_chunk(tables, finishes[start:start + CHUNK], now)
    return answers


def _finish_chunk(tables: StoreTables, finishes: Sequence[Finish], now: int) -> list[bool]:
    keys = sorted({(f.name, f.slot) for f in finishes})
    rows = (tables.runs().select_for_update()
            .filter(Q(*(Q(job=job, slot=slot) for job, slot in keys), _connector=Q.OR))
            .order_by("job", "slot")
            .values_list("id", "job", "slot", "owner", "attempt", "state"))
    runs = {(job, slot): _Run(ident, owner, attempt, state == "running")
            for ident, job, slot, owner, attempt, state in rows}
    answers: list[bool] = []
    won: list[Finish] = []
    done: list[int] = []
    for finish in finishes:
        run = runs.get((finish.name, finish.slot))
        if run is None or not (run.running and run.owner == finish.owner
                               and run.attempt == finish.attempt):
            answers.append(False)
            continue
        run.running = False
        won.append(finish)
        done.append(run.ident)
        answers.append(True)
    if won:
        tables.runs().filter(pk__in=done).update(state="done")
        _end_attempts(tables, won, now)
        _bound(tables, won, now)
    return answers


def _end_attempts(tables: StoreTables, won: Sequence[Finish], now: int) -> None:
    """The winners' attempts ended: one statement per distinct (status, error)."""
    outcomes: dict[tuple[str, str | None], list[Finish]] = {}
    for finish in won:
        outcomes.setdefault((finish.status, finish.error), []).append(finish)
    for (status, error), group in outcomes.items():
        which = Q(*(Q(job=f.name, slot=f.slot, attempt=f.attempt) for f in group),
                  _connector=Q.OR)
        tables.attempts().filter(which, manual=False, status="running").update(
            status=status, error=error, finished_at=now)


def _bound(tables: StoreTables, won: Sequence[Finish], now: int) -> None:
    """Each job's history bounded by its newest finish's limits, and the runs older than
    each job's ``retain_runs_ms`` deleted in one statement."""
    newest = {finish.name: finish for finish in won}
    bound_history(tables, {name: (f.history_size, f.history_ttl_ms)
                          for name, f in newest.items()}, now)
    old = Q(*(Q(job=name, slot__lt=now - f.retain_runs_ms) for name, f in newest.items()),
            _connector=Q.OR)
    tables.runs().filter(old).exclude(state="running").delete()


def bound_history(tables: StoreTables, limits: dict[str, tuple[int, int | None]], now: int, *,
                  skips: bool = False) -> None:
    """Keep each job's newest ``size`` finished attempts (manual ones count) and drop
    those older than its ``ttl_ms``, for ``limits`` = job -> (size, ttl_ms): one ranked
    read and one delete per distinct size, one delete per distinct ttl. With ``skips``,
    the same for the job's skip records (each kind is bounded on its own)."""
    by_size: dict[int, list[str]] = {}
    by_ttl: dict[int, list[str]] = {}
    for name, (size, ttl_ms) in sorted(limits.items()):
        by_size.setdefault(size, []).append(name)
        if ttl_ms is not None:
            by_ttl.setdefault(ttl_ms, []).append(name)
    attempts = (tables.attempts().filter(status="skipped") if skips else
                tables.attempts().exclude(status__in=("running", "skipped")))
    for size, names in by_size.items():
        # newest first, the id breaking ties between attempts started in one millisecond
        ranked = attempts.filter(job__in=names).annotate(rank=Window(
            RowNumber(), partition_by=[F("job")],
            order_by=[F("started_at").desc(), F("id").desc()]))
        surplus = list(ranked.filter(rank__gt=size).values_list("id", flat=True))
        if surplus:
            tables.attempts().filter(pk__in=surplus).delete()
    for ttl_ms, names in by_ttl.items():
        attempts.filter(job__in=names, started_at__lt=now - ttl_ms).delete()
