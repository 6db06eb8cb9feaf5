"""Skip records on the Django store (the rules: ``anarchon.backends.skips``).

One transaction: the skips' job rows locked first, in name order (as claims lock them),
so two instances recording one slot queue and the second sees the first's record; then
one read of the records and runs already there, one bulk insert, and each job's skip
records bounded as a finish batch bounds its attempts (each kind on its own).
"""

from __future__ import annotations

from collections.abc import Sequence

from django.db import transaction
from django.db.models import Q

from anarchon.backends.skips import Skip

from .finish_rounds import bound_history
from .models import StoreAttempt
from .tables import StoreTables


def record_skips(tables: StoreTables, skips: Sequence[Skip]) -> None:
    """Write each skip's record (``skips`` hold one per slot: ``check_skips``)."""
    with transaction.atomic(using=tables.alias):
        tables.sqlite_write_lock()
        names = sorted({s.name for s in skips})
        list(tables.jobs().select_for_update().filter(name__in=names).order_by("name")
             .values_list("name", flat=True))
        now = tables.now()
        keys = Q(*(Q(job=s.name, slot=s.slot) for s in skips), _connector=Q.OR)
        recorded = set(tables.attempts().filter(keys, attempt=0, manual=False)
                       .values_list("job", "slot"))
        ran = set(tables.runs().filter(keys).values_list("job", "slot"))
        tables.attempts().bulk_create([
            StoreAttempt(job=s.name, slot=s.slot, attempt=0, instance=s.owner, manual=False,
                         reason=s.reason, status="skipped", started_at=now, finished_at=now)
            for s in skips
            if (s.name, s.slot) not in recorded
            and not (s.reason == "late" and (s.name, s.slot) in ran)])
        bound_history(tables, {s.name: (s.history_size, s.history_ttl_ms) for s in skips},
                      now, skips=True)
