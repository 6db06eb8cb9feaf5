"""A heartbeat set by set: a few statements per batch of runs, not one per run.

[`Store.heartbeat`][anarchon_django.store.operations.Store.heartbeat] renews every held
lease and reads every watched run inside one transaction: per chunk of ``CHUNK`` runs,
one locked read of the held runs this owner still holds (in job and slot order, the
order claims and finishes lock runs in) and one ``UPDATE`` of their leases; one read of
the watched runs. At 1,000 jobs a second an instance watches hundreds of runs the others
won, and a statement per run made the heartbeat most of the Django store's work.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from django.db import transaction
from django.db.models import Q

from anarchon.backends.base import HeartbeatResult, HeldRun, RunKey, RunState

from .tables import StoreTables

#: runs per statement (bounds the statements' parameter counts)
CHUNK = 200


def heartbeat(tables: StoreTables, owner: str, held: Sequence[HeldRun], watched: Sequence[RunKey],
              lease_ms: int, also: Callable[[int], None] | None = None) -> HeartbeatResult:
    """Renew ``held`` (fenced by owner and attempt) and read ``watched``; then
    ``also(now)`` in the same transaction (the liveness record)."""
    with transaction.atomic(using=tables.alias):
        if held or also is not None:
            tables.sqlite_write_lock()
        now = tables.now()
        if also is not None:
            also(now)
        kept: set[RunKey] = set()
        for start in range(0, len(held), CHUNK):
            part = held[start:start + CHUNK]
            which = Q(*(Q(job=r.name, slot=r.slot, attempt=r.attempt) for r in part),
                      _connector=Q.OR)
            rows = list(tables.runs().select_for_update().filter(
                which, owner=owner, state="running").order_by("job", "slot")
                .values_list("id", "job", "slot"))
            if rows:
                tables.runs().filter(pk__in=[ident for ident, _, _ in rows]).update(
                    lease_until=now + lease_ms)
            kept.update(RunKey(job, slot) for _, job, slot in rows)
        states: list[RunState] = []
        for start in range(0, len(watched), CHUNK):
            keys = watched[start:start + CHUNK]
            which = Q(*(Q(job=k.name, slot=k.slot) for k in keys), _connector=Q.OR)
            for job, slot, run_owner, attempt, state, lease_until, handed_over in (
                    tables.runs().filter(which).values_list(
                        "job", "slot", "owner", "attempt", "state", "lease_until",
                        "handed_over")):
                states.append(RunState(job, slot, run_owner, attempt, state == "running",
                                       lease_until <= now, handed_over))
        lost = [run for run in held if run.key not in kept]
        # the lost runs with no record at all (the database forgot them), read only when
        # something was lost
        present: set[RunKey] = set()
        for start in range(0, len(lost), CHUNK):
            part = lost[start:start + CHUNK]
            which = Q(*(Q(job=r.name, slot=r.slot) for r in part), _connector=Q.OR)
            present.update(RunKey(job, slot) for job, slot in tables.runs().filter(which)
                           .values_list("job", "slot"))
    return HeartbeatResult(frozenset(run.key for run in lost), states,
                           frozenset(run.key for run in lost if run.key not in present))
