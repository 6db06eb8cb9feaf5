"""Runtime control in the ``"django"`` store (``anarchon.backends.control``): the
operations on the models ``StoreControl``, ``StoreChange``, ``StoreOffer`` and
``StoreGeneration`` (``ControlOperations``, the ``control`` part of
``anarchon_django.store.operations.Store``).

Serialisation: every change first locks the generation row (``SELECT … FOR UPDATE`` on
PostgreSQL and MySQL/MariaDB; on SQLite the transaction begins with a write, as the
store's other writes do), so changes run one at a time: the compare-and-set on the
job's version never races a concurrent first record, and no gap locks on a missing
row meet (the deadlock two concurrent ``INSERT``\\s after ``FOR UPDATE`` make on
InnoDB). A snapshot read locks the same row, so it sees the records of exactly one
generation on every database (PostgreSQL's READ COMMITTED gives each statement its own
snapshot). Claims never touch the generation row: the version fence
(``Store.claim``) locks the job's control row only.

In the caller's own thread and transaction (admin pages, ``manage.py anarchon``:
``anarchon_django.control.direct_control``) reads take no lock (``peek_controls``), and a change
waits at most ``LOCK_WAIT`` seconds for the generation row (``change_control(change,
wait=LOCK_WAIT)``: ``NOWAIT`` retried with a backoff), then raises ``StoreError``: a
request's or a test's long transaction never makes another one wait without bound.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from django.db import connections, transaction
from django.db.models import Exists, F

from anarchon.backends.base import Poll, TriggerRequest
from anarchon.backends.control import (
    CHANGE_LOG_SIZE,
    OFFER_TTL_MS,
    ControlChange,
    ControlRecord,
    ControlSnapshot,
)
from anarchon.errors import StoreError

from .models import StoreGeneration, StoreOffer, StoreTrigger
from .tables import StoreTables

#: the primary key of the one generation row
GENERATION_ID = 1

#: how long a change made in the caller's thread waits for the generation row's lock
#: (seconds) before it gives up with ``StoreError``; on SQLite the connection's own
#: ``timeout`` (Django's default: 5 s) bounds the wait for the write lock instead
LOCK_WAIT = 10.0


class ControlOperations:
    """The control calls of the store on ``tables`` (synchronous; in the thread owning
    the connection). ``take(names)`` takes the live trigger requests of ``names``
    (``Store.take_triggers``'s part after its cheap check): a poll that finds one pending
    takes them in the same call."""

    def __init__(self, tables: StoreTables,
                 take: Callable[[Sequence[str]], list[TriggerRequest]]) -> None:
        self.tables = tables
        self.take = take
        #: the poll's query, as the ORM compiled it for this database (in ``poll``)
        self._poll_sql: tuple[str, tuple[Any, ...]] | None = None

    @property
    def alias(self) -> str:
        """The database alias."""
        return self.tables.alias

    def _control_rows(self, name: str) -> list[tuple[int, str, int]]:
        """``(pk, job, version)`` of the rows ``job = name`` matches, locked until the
        caller's transaction ends. On MySQL/MariaDB that can be another job's row:
        their default collations ignore case and trailing spaces, so the callers compare
        the names again in Python."""
        return list(self.tables.controls().select_for_update().filter(job=name)
                    .values_list("pk", "job", "version"))

    def version(self, name: str) -> int:
        """Job ``name``'s stored control version (0: no record), its row locked: the
        version fence of a claim."""
        return next((version for _, job, version in self._control_rows(name)
                     if job == name), 0)

    def versions(self, names: Sequence[str]) -> dict[str, int]:
        """The stored control version of each of ``names`` that has a record, their rows
        locked in name order (one query): the version fence of a batch of claims."""
        wanted = set(names)
        return {job: version for _, job, version in self.tables.controls().select_for_update()
                .filter(job__in=sorted(wanted)).order_by("job")
                .values_list("pk", "job", "version") if job in wanted}

    def _lock_generation(self, wait: float | None = None) -> int | None:
        """Lock the generation row (in the caller's transaction); its value, or None if
        it is gone. ``wait``: give up after this many seconds (``StoreError``)."""
        value: int | None = self.tables.bounded(
            lambda nowait: self.tables.generations().select_for_update(nowait=nowait)
            .filter(pk=GENERATION_ID).values_list("value", flat=True).first(),
            wait, "the control records")
        return value

    def _make_generation(self) -> None:
        """Make the generation row again (a test database's flush deletes it), at 0:
        in autocommit, so no lock outlives the statement."""
        self.tables.generations().bulk_create([StoreGeneration(id=GENERATION_ID, value=0)],
                                        ignore_conflicts=True)

    @contextmanager
    def locked(self, wait: float | None = None) -> Iterator[int]:
        """A transaction holding the generation row's lock (made again if missing);
        yields the generation. ``wait``: see ``_lock_generation``."""
        for _ in range(3):
            with transaction.atomic(using=self.alias):
                self.tables.sqlite_write_lock()
                generation = self._lock_generation(wait)
                if generation is not None:
                    yield int(generation)
                    return
            self._make_generation()
        raise StoreError(f"Django database {self.alias!r}: the control generation row "
                         "(anarchon_django_store_generation) keeps disappearing")

    # -- the engine's calls ----------------------------------------------------------------

    def poll(self, names: Sequence[str]) -> Poll:
        """The generation and whether any trigger is pending, in one query; the
        triggers for ``names`` are taken only when some are pending."""
        if self._poll_sql is None:
            # compiled once: building the queryset costs more than running it
            # (sql_with_params() would compile for the default database, not this one)
            query = (self.tables.generations().filter(pk=GENERATION_ID)
                     .annotate(pending=Exists(StoreTrigger.objects.all()))
                     .values_list("value", "pending").query)
            self._poll_sql = query.get_compiler(using=self.alias).as_sql()
        with connections[self.alias].cursor() as cursor:
            cursor.execute(*self._poll_sql)
            row = cursor.fetchone()
        if row is None:
            self._make_generation()
            generation, pending = 0, bool(self.tables.triggers().exists())
        else:
            generation, pending = int(row[0]), bool(row[1])
        return Poll(self.take(names) if pending else [], generation)

    def read_controls(self) -> ControlSnapshot:
        """The generation, every record and the live offers, as of one generation."""
        with self.locked() as generation:
            rows = list(self.tables.controls().values_list("job", "version", "record"))
            offers = list(self.tables.offers().filter(seen__gt=self.tables.now() - OFFER_TTL_MS)
                          .values_list("instance", "handlers"))
        return ControlSnapshot(
            generation,
            {job: ControlRecord(job, version, record) for job, version, record in rows},
            {instance: tuple(json.loads(handlers)) for instance, handlers in offers})

    def peek_controls(self) -> ControlSnapshot:
        """``read_controls()`` without a lock or a write: for pages and commands, in the
        caller's transaction (which must hold no lock another connection waits for).
        The records may be of two generations on PostgreSQL (one statement each): fine
        for showing them, and every change compares versions under the lock anyway."""
        generation = (self.tables.generations().filter(pk=GENERATION_ID)
                      .values_list("value", flat=True).first())
        rows = list(self.tables.controls().values_list("job", "version", "record"))
        offers = list(self.tables.offers().filter(seen__gt=self.tables.now() - OFFER_TTL_MS)
                      .values_list("instance", "handlers"))
        return ControlSnapshot(
            int(generation or 0),
            {job: ControlRecord(job, version, record) for job, version, record in rows},
            {instance: tuple(json.loads(handlers)) for instance, handlers in offers})

    def change_control(self, change: ControlChange, wait: float | None = None) -> int:
        """Compare-and-set job ``change.name``'s record, raise the generation and append
        to the job's change log, in one transaction; the new version, or 0. ``wait``:
        how long to wait for the generation row's lock (None: as long as it takes)."""
        with self.locked(wait):
            now = self.tables.now()
            rows = self._control_rows(change.name)
            current = next(((pk, version) for pk, job, version in rows
                            if job == change.name), None)
            if current is None and rows:
                raise ValueError(
                    f"job {change.name!r}: database {self.alias!r} compares job names "
                    "without regard to case or trailing spaces (its collation) and "
                    f"already holds the control record of job {rows[0][1]!r}; give the "
                    "job a name that differs in more than that")
            if (0 if current is None else current[1]) != change.expected_version:
                return 0
            version = change.expected_version + 1
            if current is None:
                self.tables.controls().create(job=change.name, version=version,
                                        record=change.text, changed=now)
            else:
                self.tables.controls().filter(pk=current[0]).update(
                    version=version, record=change.text, changed=now)
            self.tables.generations().filter(pk=GENERATION_ID).update(value=F("value") + 1)
            log = self.tables.changes()
            log.create(job=change.name, changed=now, entry=change.entry)
            # the newest CHANGE_LOG_SIZE stay; no LIMIT in a subquery (MySQL)
            cut = (log.filter(job=change.name).order_by("-id")
                   .values_list("id", flat=True)[CHANGE_LOG_SIZE:CHANGE_LOG_SIZE + 1])
            for ident in cut:
                log.filter(job=change.name, id__lte=ident).delete()
            return version

    def change_log(self, name: str, count: int) -> list[str]:
        """Job ``name``'s newest ``count`` change-log entries, newest first."""
        if count <= 0:
            return []
        return [str(entry) for entry in self.tables.changes().filter(job=name).order_by("-id")
                .values_list("entry", flat=True)[:count]]

    def offer_handlers(self, instance_id: str, handlers: Sequence[str]) -> None:
        """Replace ``instance_id``'s offer (stamped with the database's clock), or
        withdraw it (no names); offers past ``OFFER_TTL_MS`` are deleted."""
        with transaction.atomic(using=self.alias):
            self.tables.sqlite_write_lock()
            now = self.tables.now()
            offers = self.tables.offers()
            offers.filter(seen__lte=now - OFFER_TTL_MS).delete()
            if not handlers:
                offers.filter(instance=instance_id).delete()
                return
            # MySQL's ON DUPLICATE KEY UPDATE names no conflict target
            target = (["instance"] if connections[self.alias].features
                      .supports_update_conflicts_with_target else None)
            offers.bulk_create(
                [StoreOffer(instance=instance_id, handlers=json.dumps(list(handlers)),
                            seen=now)],
                update_conflicts=True, unique_fields=target,
                update_fields=["handlers", "seen"])

    def purge(self) -> int:
        """Delete every record, log entry and offer (in the caller's transaction, which
        holds the generation row); raise the generation, so no instance mistakes the
        empty store for the snapshot it last read. How many rows were deleted."""
        tables = self.tables
        removed = sum(int(rows.all().delete()[0])
                      for rows in (tables.controls(), tables.changes(), tables.offers()))
        self.tables.generations().filter(pk=GENERATION_ID).update(value=F("value") + 1)
        return removed


__all__ = ["GENERATION_ID", "ControlOperations"]
