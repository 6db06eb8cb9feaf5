"""A heartbeat set by set: a few statements per batch of runs, not one per run.

[`Store.heartbeat`][anarchon_django.store.operations.Store.heartbeat] renews every held
lease and reads every watched run inside one transaction: per chunk of ``CHUNK`` runs,
one locked read of the held runs this owner still holds (in job and slot order, the
order claims and finishes lock runs in) and one ``UPDATE`` of their leases; one read of
the watched runs. At 1,000 jobs a second an instance watches hundreds of runs the others
won, and a statement per run made the heartbeat most of the Django store's work.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from django.db import transaction
from django.db.models import Q

from anarchon.backends.base import HeartbeatResult, HeldRun, RunKey, RunState

if TYPE_CHECKING:
    from .operations import Store

#: runs per statement (bounds the statements' parameter counts)
CHUNK = 200


def heartbeat(store: Store, owner: str, held: Sequence[HeldRun], watched: Sequence[RunKey],
              lease_ms: int) -> HeartbeatResult:
    """Renew ``held`` (fenced by owner and attempt) and read ``watched``."""
    with transaction.atomic(using=store.alias):
        if held:
            store._sqlite_write_lock()
        now = store.now()
        kept: set[RunKey] = set()
        for start in range(0, len(held), CHUNK):
            part = held[start:start + CHUNK]
            which = Q(*(Q(job=r.name, slot=r.slot, attempt=r.attempt) for r in part),
                      _connector=Q.OR)
            rows = list(store._runs().select_for_update().filter(
                which, owner=owner, state="running").order_by("job", "slot")
                .values_list("id", "job", "slot"))
            if rows:
                store._runs().filter(pk__in=[ident for ident, _, _ in rows]).update(
                    lease_until=now + lease_ms)
            kept.update(RunKey(job, slot) for _, job, slot in rows)
        states: list[RunState] = []
        for start in range(0, len(watched), CHUNK):
            keys = watched[start:start + CHUNK]
            which = Q(*(Q(job=k.name, slot=k.slot) for k in keys), _connector=Q.OR)
            for job, slot, run_owner, attempt, state, lease_until, handed_over in (
                    store._runs().filter(which).values_list(
                        "job", "slot", "owner", "attempt", "state", "lease_until",
                        "handed_over")):
                states.append(RunState(job, slot, run_owner, attempt, state == "running",
                                       lease_until <= now, handed_over))
    return HeartbeatResult(frozenset(run.key for run in held if run.key not in kept), states)
