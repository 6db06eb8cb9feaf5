"""Queries of the ``"django"`` store made in the *caller's* thread and transaction.

The shared scheduler's backend runs the ORM in a thread of its own (right for
``manage.py anarchon run``). A page or a command of the project reads and writes the
store through its own connection instead, with these functions: then a ``TestCase``
(whose transaction holds the SQLite write lock, or an in-memory test database that only
one connection may write) sees its own writes, never waits on a lock, and no extra
connection stays open when the test database is dropped. Filtering, searching and
paging happen in the database.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Q, QuerySet

from anarchon import JobInfo, RunRecord, Scheduler
from anarchon.backends.trigger_rules import is_gone
from anarchon.control.runtime import describe_jobs, registered_info, with_registrations
from anarchon_django.store.backend import DjangoBackend
from anarchon_django.store.models import StoreAttempt
from anarchon_django.store.operations import Store, record


def store_of(scheduler: Scheduler) -> Store | None:
    """The ORM store behind ``scheduler``, or None for another backend."""
    backend = scheduler.backend
    return backend.store if isinstance(backend, DjangoBackend) else None


def jobs(scheduler: Scheduler, store: Store) -> list[JobInfo]:
    """Jobs declared here plus the jobs registered in the store, by name, with their
    runtime control (paused, overridden and dynamic jobs) applied; read without a lock
    (``Store.peek_controls``), so the caller's transaction holds none afterwards."""
    infos = {info.name: info for info in declared(scheduler)}
    known = store.known_jobs()
    for spec in known:
        if spec.name not in infos:
            infos[spec.name] = registered_info(spec)
    return with_registrations(describe_jobs(infos, store.peek_controls(),
                                            scheduler.core.options),
                              known, set(scheduler.job_names), store.now())


def declared(scheduler: Scheduler) -> list[JobInfo]:
    """The jobs registered on ``scheduler`` (no I/O)."""
    core = scheduler.core
    return [core.control.info(job) for job in core.control.jobs_here.values()]


def gone(scheduler: Scheduler, store: Store, name: str, info: JobInfo | None = None
         ) -> bool:
    """Whether job ``name`` is gone: declared nowhere in this process and neither
    registered nor started by any instance for ``GONE_AFTER_MS`` (the core's rule,
    ``anarchon.backends.trigger_rules.is_gone``). A dynamic job (``info``) whose
    handler a running instance offers is never gone (that instance runs it), nor one
    that no instance has run yet (as ``JobInfo.gone`` on the other stores)."""
    seen = store.last_seen(name)
    if info is not None and info.source == "dynamic":  # as the core says (JobInfo.gone)
        return not info.runnable_by and seen is not None and is_gone(seen, store.now())
    return name not in scheduler.job_names and is_gone(seen, store.now())


def gone_message(name: str) -> str:
    """The refusal of a manual run of gone job ``name``."""
    return (f"job “{name}” is gone: no instance has registered or run it for 24 hours "
            f"(python manage.py anarchon forget {name} removes it)")


@dataclass(frozen=True)
class HistoryQuery:
    """Filters of the run history; ``search`` matches job, instance and error text."""

    job: str | None = None
    status: str | None = None
    reason: str | None = None
    instance: str | None = None
    search: str | None = None
    since: datetime | None = None
    until: datetime | None = None


#: sortable history columns: name -> model field
ORDERINGS = {"job": "job", "started": "started_at", "status": "status",
             "instance": "instance", "reason": "reason", "attempt": "attempt",
             "scheduled": "slot"}


def attempts(store: Store, query: HistoryQuery, order: str = "-started") -> QuerySet[Any]:
    """The attempts ``query`` selects, as a lazy queryset (page it with ``Paginator``)."""
    rows = StoreAttempt.objects.using(store.alias).all()
    for field, value in (("job", query.job), ("status", query.status),
                         ("reason", query.reason), ("instance", query.instance)):
        if value:
            rows = rows.filter(**{field: value})
    if query.search:
        rows = rows.filter(Q(job__icontains=query.search) | Q(instance__icontains=query.search)
                           | Q(error__icontains=query.search))
    if query.since is not None:
        rows = rows.filter(started_at__gte=int(query.since.timestamp() * 1000))
    if query.until is not None:
        rows = rows.filter(started_at__lt=int(query.until.timestamp() * 1000))
    field = ORDERINGS.get(order.lstrip("-"), "started_at")
    sign = "-" if order.startswith("-") else ""
    ordered: QuerySet[Any] = rows.order_by(f"{sign}{field}", f"{sign}id")
    return ordered


def as_records(rows: Sequence[StoreAttempt]) -> list[RunRecord]:
    """History rows as the core's records."""
    return [record(row) for row in rows]


def instances(store: Store) -> list[str]:
    """Every instance id in the history, sorted."""
    return sorted(StoreAttempt.objects.using(store.alias)
                  .values_list("instance", flat=True).distinct())
