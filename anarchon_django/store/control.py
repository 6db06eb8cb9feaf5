"""Runtime control in the ``"django"`` store (``anarchon.backends.control``): the
operations on the models ``StoreControl``, ``StoreChange``, ``StoreOffer`` and
``StoreGeneration``, mixed into ``anarchon_django.store.operations.Store``.

Serialisation: every change first locks the generation row (``SELECT … FOR UPDATE`` on
PostgreSQL and MySQL/MariaDB; on SQLite the transaction begins with a write, as the
store's other writes do), so changes run one at a time: the compare-and-set on the
job's version never races a concurrent first record, and no gap locks on a missing
row meet (the deadlock two concurrent ``INSERT``\\s after ``FOR UPDATE`` make on
InnoDB). A snapshot read locks the same row, so it sees the records of exactly one
generation on every database (PostgreSQL's READ COMMITTED gives each statement its own
snapshot). Claims never touch the generation row: the version fence
(``Store.claim``) locks the job's control row only.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
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

from .models import StoreChange, StoreControl, StoreGeneration, StoreOffer, StoreTrigger

#: the primary key of the one generation row
GENERATION_ID = 1


class ControlOperations:
    """The control calls of ``Store`` (synchronous; in the thread owning the connection)."""

    alias: str
    #: the poll's query, as the ORM compiled it for this database (in ``poll``)
    _poll_sql: tuple[str, tuple[Any, ...]] | None = None

    def now(self) -> int:
        raise NotImplementedError  # provided by Store

    def _sqlite_write_lock(self) -> None:
        raise NotImplementedError  # provided by Store

    def _take(self, names: Sequence[str]) -> list[TriggerRequest]:
        raise NotImplementedError  # provided by Store

    def _triggers(self) -> Any:
        raise NotImplementedError  # provided by Store

    def _controls(self) -> Any:
        return StoreControl.objects.using(self.alias)

    def _changes(self) -> Any:
        return StoreChange.objects.using(self.alias)

    def _offers(self) -> Any:
        return StoreOffer.objects.using(self.alias)

    def _generations(self) -> Any:
        return StoreGeneration.objects.using(self.alias)

    def _control_rows(self, name: str) -> list[tuple[int, str, int]]:
        """``(pk, job, version)`` of the rows ``job = name`` matches, locked until the
        caller's transaction ends. On MySQL/MariaDB that can be another job's row:
        their default collations ignore case and trailing spaces, so the callers compare
        the names again in Python."""
        return list(self._controls().select_for_update().filter(job=name)
                    .values_list("pk", "job", "version"))

    def control_version(self, name: str) -> int:
        """Job ``name``'s stored control version (0: no record), its row locked: the
        version fence of a claim."""
        return next((version for _, job, version in self._control_rows(name)
                     if job == name), 0)

    def control_versions(self, names: Sequence[str]) -> dict[str, int]:
        """The stored control version of each of ``names`` that has a record, their rows
        locked in name order (one query): the version fence of a batch of claims."""
        wanted = set(names)
        return {job: version for _, job, version in self._controls().select_for_update()
                .filter(job__in=sorted(wanted)).order_by("job")
                .values_list("pk", "job", "version") if job in wanted}

    def _lock_generation(self) -> int | None:
        """Lock the generation row (in the caller's transaction); its value, or None if
        it is gone."""
        value: int | None = (self._generations().select_for_update().filter(
            pk=GENERATION_ID).values_list("value", flat=True).first())
        return value

    def _make_generation(self) -> None:
        """Make the generation row again (a test database's flush deletes it), at 0:
        in autocommit, so no lock outlives the statement."""
        self._generations().bulk_create([StoreGeneration(id=GENERATION_ID, value=0)],
                                        ignore_conflicts=True)

    @contextmanager
    def _locked(self) -> Iterator[int]:
        """A transaction holding the generation row's lock (made again if missing);
        yields the generation."""
        for _ in range(3):
            with transaction.atomic(using=self.alias):
                self._sqlite_write_lock()
                generation = self._lock_generation()
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
            query = (self._generations().filter(pk=GENERATION_ID)
                     .annotate(pending=Exists(StoreTrigger.objects.all()))
                     .values_list("value", "pending").query)
            self._poll_sql = query.get_compiler(using=self.alias).as_sql()
        with connections[self.alias].cursor() as cursor:
            cursor.execute(*self._poll_sql)
            row = cursor.fetchone()
        if row is None:
            self._make_generation()
            generation, pending = 0, bool(self._triggers().exists())
        else:
            generation, pending = int(row[0]), bool(row[1])
        return Poll(self._take(names) if pending else [], generation)

    def read_controls(self) -> ControlSnapshot:
        """The generation, every record and the live offers, as of one generation."""
        with self._locked() as generation:
            rows = list(self._controls().values_list("job", "version", "record"))
            offers = list(self._offers().filter(seen__gt=self.now() - OFFER_TTL_MS)
                          .values_list("instance", "handlers"))
        return ControlSnapshot(
            generation,
            {job: ControlRecord(job, version, record) for job, version, record in rows},
            {instance: tuple(json.loads(handlers)) for instance, handlers in offers})

    def change_control(self, change: ControlChange) -> int:
        """Compare-and-set job ``change.name``'s record, raise the generation and append
        to the job's change log, in one transaction; the new version, or 0."""
        with self._locked():
            now = self.now()
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
                self._controls().create(job=change.name, version=version,
                                        record=change.text, changed=now)
            else:
                self._controls().filter(pk=current[0]).update(
                    version=version, record=change.text, changed=now)
            self._generations().filter(pk=GENERATION_ID).update(value=F("value") + 1)
            log = self._changes()
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
        return [str(entry) for entry in self._changes().filter(job=name).order_by("-id")
                .values_list("entry", flat=True)[:count]]

    def offer_handlers(self, instance_id: str, handlers: Sequence[str]) -> None:
        """Replace ``instance_id``'s offer (stamped with the database's clock), or
        withdraw it (no names); offers past ``OFFER_TTL_MS`` are deleted."""
        with transaction.atomic(using=self.alias):
            self._sqlite_write_lock()
            now = self.now()
            offers = self._offers()
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

    def purge_control(self) -> int:
        """Delete every record, log entry and offer (in the caller's transaction, which
        holds the generation row); raise the generation, so no instance mistakes the
        empty store for the snapshot it last read. How many rows were deleted."""
        removed = sum(int(rows.all().delete()[0])
                      for rows in (self._controls(), self._changes(), self._offers()))
        self._generations().filter(pk=GENERATION_ID).update(value=F("value") + 1)
        return removed


__all__ = ["GENERATION_ID", "ControlOperations"]
