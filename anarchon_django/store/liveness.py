"""Liveness records in the Django store (``StoreInstance``), written in the heartbeat's
transaction (see ``anarchon.backends.liveness``); called on the ORM thread.

The records dead for long are deleted by primary key, after a read that waits on no row
(``SKIP LOCKED`` where the database has it, else a plain read): a ``DELETE … WHERE
expires < …`` scans the whole table (``expires`` has no index), and on InnoDB that
statement waits for every row another transaction holds, so two instances' heartbeats,
each holding its own updated record, deadlocked on each other's (errno 1213).
"""

from __future__ import annotations

from django.db import connections, transaction

from anarchon.backends.liveness import KEEP_DEAD_MS, InstanceInfo, InstanceRecord, Instances

from .tables import StoreTables


def write(tables: StoreTables, info: InstanceInfo, ttl_ms: int, now: int) -> None:
    """Store ``info`` stamped ``now`` and delete the records dead for long (inside the
    caller's transaction)."""
    rows = tables.instances()
    fields = {"record": info.to_json(), "last_seen": now, "expires": now + ttl_ms}
    if not rows.filter(instance=info.id).update(**fields):
        rows.create(instance=info.id, **fields)
    dead = rows.filter(expires__lt=now - KEEP_DEAD_MS)
    if connections[tables.alias].features.has_select_for_update_skip_locked:
        dead = dead.select_for_update(skip_locked=True)  # a held record is no dead one
    ids = list(dead.values_list("pk", flat=True))
    if ids:  # the condition again: without the lock, a record may have been renewed since
        rows.filter(pk__in=ids, expires__lt=now - KEEP_DEAD_MS).delete()


def leave(tables: StoreTables, instance_id: str) -> None:
    tables.instances().filter(instance=instance_id).delete()


def read(tables: StoreTables) -> Instances:
    with transaction.atomic(using=tables.alias):
        now = tables.now()
        rows = list(tables.instances().order_by("instance")
                    .values_list("instance", "record", "last_seen", "expires"))
    return Instances(now, [InstanceRecord.decode(i, r, seen, expires)
                           for i, r, seen, expires in rows])


__all__ = ["leave", "read", "write"]
