"""StoreTables: the ``"django"`` store's tables on one database alias, and what every
operation on them shares.

The querysets of the store's models on the alias, the database's clock, the SQLite write
lock a transaction begins with (see ``anarchon_django.store.operations``), the job row's
lock a claim takes first, and the end of a scheduled attempt (a claim that interrupts an
expired run, a takeover, a release). The store's parts (``Store``, the lone claim, the
claim, finish and heartbeat rounds, skip records, liveness, runtime control) each receive
this object, not the store: it is all they share. Call it in the thread that owns the
connection.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

from django.db import OperationalError, connections, transaction
from django.db.models import F

from anarchon.errors import StoreError

from .models import (
    StoreAttempt,
    StoreChange,
    StoreControl,
    StoreGeneration,
    StoreInstance,
    StoreJob,
    StoreOffer,
    StoreRun,
    StoreTrigger,
    StoreValue,
)
from .worker import database_ms

T = TypeVar("T")


class StoreTables:
    """The store's querysets, clock and shared row helpers on database ``alias``."""

    def __init__(self, alias: str) -> None:
        self.alias = alias

    def __repr__(self) -> str:
        return f"<StoreTables database {self.alias!r}>"

    def now(self) -> int:
        """The database clock, epoch ms."""
        return database_ms(self.alias)

    # -- querysets -------------------------------------------------------------------------

    def jobs(self) -> Any:
        return StoreJob.objects.using(self.alias)

    def runs(self) -> Any:
        return StoreRun.objects.using(self.alias)

    def attempts(self) -> Any:
        return StoreAttempt.objects.using(self.alias)

    def triggers(self) -> Any:
        return StoreTrigger.objects.using(self.alias)

    def values(self) -> Any:
        return StoreValue.objects.using(self.alias)

    def instances(self) -> Any:
        return StoreInstance.objects.using(self.alias)

    def controls(self) -> Any:
        return StoreControl.objects.using(self.alias)

    def changes(self) -> Any:
        return StoreChange.objects.using(self.alias)

    def offers(self) -> Any:
        return StoreOffer.objects.using(self.alias)

    def generations(self) -> Any:
        return StoreGeneration.objects.using(self.alias)

    # -- locks and shared writes -----------------------------------------------------------

    def sqlite_write_lock(self) -> None:
        """On SQLite, begin the transaction with a write (``BEGIN IMMEDIATE``'s part: a
        read lock is never upgraded, the upgrade is what deadlocks deferred SQLite
        transactions); nothing on the other databases."""
        if connections[self.alias].vendor == "sqlite":
            self.jobs().filter(name="").update(updated=F("updated"))

    def lock_job(self, name: str, wait: float | None = None) -> StoreJob | None:
        """Job ``name``'s row, locked until the caller's transaction ends (None: not
        registered); what a claim locks first. ``wait``: see ``bounded``."""
        self.sqlite_write_lock()
        job: StoreJob | None = self.bounded(
            lambda nowait: self.jobs().select_for_update(nowait=nowait).filter(
                name=name).first(), wait, f"job {name!r}'s row")
        return job

    def bounded(self, lock: Callable[[bool], T], wait: float | None, what: str) -> T:
        """``lock(nowait)``: a ``SELECT … FOR UPDATE`` in the caller's transaction.
        With ``wait`` (seconds; where the database has ``NOWAIT``), it is tried with
        ``NOWAIT`` in a savepoint (a refusal leaves the caller's transaction usable) and
        retried with a backoff until ``wait`` has passed, then ``StoreError`` naming
        ``what``: a request's or a test's long transaction never makes an admin page or
        ``manage.py anarchon`` wait without bound. Without, it waits as the database
        does (on SQLite the connection's ``timeout`` bounds the write lock)."""
        if wait is None or not connections[self.alias].features.has_select_for_update_nowait:
            return lock(False)
        deadline, pause = time.monotonic() + wait, 0.005
        while True:
            try:
                with transaction.atomic(using=self.alias):
                    return lock(True)
            except OperationalError as exc:
                if time.monotonic() + pause > deadline:
                    raise StoreError(
                        f"Django database {self.alias!r}: {what} stayed locked by another "
                        f"transaction for {wait:g} s (a change not yet committed, or a "
                        "test or request holding it); try again") from exc
                time.sleep(pause)
                pause = min(pause * 2, 0.2)

    def end_attempt(self, name: str, slot: int, attempt: int, status: str,
                    error: str | None, now: int) -> None:
        """End the scheduled attempt ``(name, slot, attempt)`` if it is still running."""
        self.attempts().filter(job=name, slot=slot, attempt=attempt, manual=False,
                               status="running").update(
            status=status, error=error, finished_at=now)

    def where(self, model: Any) -> str:
        """Where ``model``'s rows live, for the log (``Model._meta`` is Django's
        documented model metadata API)."""
        return f"Django database {self.alias!r}, table {model._meta.db_table}"


__all__ = ["StoreTables"]
