"""Schedulers built from settings and declarations, and the queries the admin and
commands share.

``build_scheduler()`` makes a new [`anarchon.Scheduler`][anarchon.Scheduler] for ``manage.py
anarchon run``; ``get_scheduler()`` is the process-wide one (never started) that pages and commands
read history through and send manual-run requests with.
"""

from __future__ import annotations

import functools
import inspect
import re
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings as django_settings
from django.db import close_old_connections, connections
from django.utils.module_loading import import_string

from anarchon import JobInfo, RunContext, RunRecord, Scheduler, TriggerRefusedError
from anarchon_django.control import direct
from anarchon_django.settings import declarations
from anarchon_django.settings.backend import build_backend
from anarchon_django.settings.conf import AnarchonSettings, SettingsError, get_settings, on_reset
from anarchon_django.settings.declarations import Declaration
from anarchon_django.store.control import LOCK_WAIT

#: how many attempts per job the cross-job history reads (the core queries one job at a
#: time; the default ``history_size`` keeps 100)
HISTORY_SCAN = 1000


def all_declarations(config: AnarchonSettings | None = None) -> list[Declaration]:
    """Decorated jobs plus ``ANARCHON["JOBS"]``; a duplicate name raises ``ValueError``."""
    config = config or get_settings()
    jobs = {d.name: d for d in declarations.declared()}
    for entry in config.jobs:
        if entry.name in jobs:
            raise ValueError(f"job {entry.name!r} is declared twice: in ANARCHON['JOBS'] and "
                             f"by {jobs[entry.name].origin}")
        try:
            handler = import_string(entry.callable)
        except ImportError as exc:
            raise SettingsError(f"ANARCHON['JOBS'][{entry.name!r}]['callable'] "
                                f"{entry.callable!r} cannot be imported: {exc}",
                                "anarchon.E005") from exc
        jobs[entry.name] = Declaration(entry.kind, entry.name, entry.when, handler,
                                       entry.options, f"ANARCHON['JOBS'][{entry.name!r}]")
    return list(jobs.values())


def with_fresh_connections(handler: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap a handler so each run starts and ends with healthy Django connections.

    Before: ``close_old_connections()`` (drops broken or expired ones). After: the same,
    then every connection of the thread is closed, because the core runs each sync
    handler in a thread of its own that ends with the run.
    """
    if inspect.iscoroutinefunction(handler):
        cleanup = sync_to_async(_cleanup, thread_sensitive=True)

        @functools.wraps(handler)
        async def run_async(ctx: RunContext) -> Any:
            await cleanup(close_all=False)
            try:
                return await handler(ctx)
            finally:
                await cleanup(close_all=False)

        return run_async

    @functools.wraps(handler)
    def run(ctx: RunContext) -> Any:
        close_old_connections()
        try:
            return handler(ctx)
        finally:
            _cleanup(close_all=True)

    return run


def _cleanup(close_all: bool) -> None:
    close_old_connections()
    if close_all:
        connections.close_all()


def build_scheduler(jobs: Iterable[str] | None = None, *, instance_id: str | None = None,
                    **overrides: Any) -> Scheduler:
    """A new scheduler on the configured backend with the declared jobs (or only ``jobs``).

    ``overrides`` replace ``ANARCHON["SCHEDULER"]`` options. Unknown job names raise
    ``LookupError`` listing the declared ones.
    """
    config = get_settings()
    arguments = {**config.scheduler_arguments(), **overrides}
    instance_id = instance_id or arguments.pop("instance_id", None)
    arguments.pop("instance_id", None)
    declared = all_declarations(config)
    wanted = None if jobs is None else list(jobs)
    if wanted is not None:
        missing = sorted(set(wanted) - {d.name for d in declared})
        if missing:
            raise LookupError(f"unknown job(s) {missing}; declared jobs: "
                              f"{', '.join(sorted(d.name for d in declared)) or 'none'}")
    scheduler = Scheduler(build_backend(config), instance_id=instance_id,
                          metrics=config.metrics, **arguments)
    for declaration in declared:
        if wanted is None or declaration.name in wanted:
            register = getattr(scheduler, declaration.kind)
            register(declaration.name, declaration.when,
                     with_fresh_connections(declaration.handler), **declaration.options)
    if wanted is None:  # ``--jobs a,b`` runs those jobs only: no dynamic ones
        for offered in declarations.handlers():
            scheduler.handler(offered.name, with_fresh_connections(offered.handler))
    from anarchon_django.signals import attach

    attach(scheduler, config.listeners)
    if _schedules_dramatiq(config) and wanted is None:
        from anarchon_dramatiq.discovery import register_project_actors

        register_project_actors(scheduler)  # the winner sends; workers record outcomes
    return scheduler


def _schedules_dramatiq(config: AnarchonSettings) -> bool:
    """``ANARCHON["DRAMATIQ"]``, or by default: is django_dramatiq installed?"""
    if config.dramatiq is not None:
        return config.dramatiq
    return "django_dramatiq" in getattr(django_settings, "INSTALLED_APPS", ())


_lock = threading.Lock()
_shared: Scheduler | None = None


def get_scheduler() -> Scheduler:
    """The process-wide scheduler for queries and manual-run requests (never started)."""
    global _shared
    with _lock:
        if _shared is None:
            _shared = build_scheduler()
        return _shared


@on_reset
def reset() -> None:
    """Close the shared scheduler; the next
    [`get_scheduler()`][anarchon_django.control.runtime.get_scheduler] builds a new one (also
    when the setting changes: registered with
    [`on_reset()`][anarchon_django.settings.conf.on_reset])."""
    global _shared
    with _lock:
        scheduler, _shared = _shared, None
    if scheduler is not None:
        scheduler.close()


# -- queries ---------------------------------------------------------------------------


@dataclass(frozen=True)
class JobRow:
    """A job with what pages and ``manage.py anarchon list`` show about it."""

    info: JobInfo
    timezone: str | None
    last: RunRecord | None
    #: the instance running the job now (the newest attempt still ``running``)
    holder: str | None


def job_infos(scheduler: Scheduler | None = None) -> list[JobInfo]:
    """Jobs declared here plus jobs other instances registered in the store (with their
    runtime control: paused, overridden and dynamic jobs, where the backend supports it)."""
    scheduler = scheduler or get_scheduler()
    store = direct.store_of(scheduler)
    return scheduler.jobs() if store is None else direct.jobs(scheduler, store)


def job_names(scheduler: Scheduler | None = None) -> list[str]:
    """Jobs declared here plus jobs other instances registered in the store."""
    return [info.name for info in job_infos(scheduler)]


def history(name: str, count: int, scheduler: Scheduler | None = None) -> list[RunRecord]:
    """Newest-first attempts of ``name`` (the ``"django"`` store: in this thread)."""
    scheduler = scheduler or get_scheduler()
    store = direct.store_of(scheduler)
    return scheduler.history(name, count) if store is None else store.history(name, count)


def gone_jobs(infos: Iterable[JobInfo], scheduler: Scheduler | None = None) -> set[str]:
    """Which of the jobs ``infos`` (``job_infos()``) describe are gone: declared nowhere
    here and registered (or, on the ``"django"`` store, started) by no instance for
    24 hours (``JobInfo.gone``, ``direct.gone``); never a dynamic job that a running
    instance offers the handler of."""
    scheduler = scheduler or get_scheduler()
    store = direct.store_of(scheduler)
    if store is None:
        return {info.name for info in infos if info.gone}
    return {info.name for info in infos if direct.gone(scheduler, store, info.name, info)}


def forget(name: str, scheduler: Scheduler | None = None) -> int:
    """Delete every record of job ``name`` from the store (the core's ``forget()``, on
    every lease store; the ``"django"`` store in this thread); how many. Claim-only
    stores raise ``NotImplementedError``."""
    scheduler = scheduler or get_scheduler()
    store = direct.store_of(scheduler)
    return scheduler.forget(name) if store is None else store.forget(name, wait=LOCK_WAIT)


#: the zone at the end of a cron schedule's description: ``cron '0 3 * * *' (Asia/Tokyo)``
#: (a code job's), ``cron 0 3 * * * (Asia/Tokyo)`` (a stored override or dynamic job's)
_CRON_ZONE = re.compile(r"cron .+ \((?P<zone>[^()\s]+)\)")


#: the zone a custom schedule's description names first: ``crontab '0 3 1-7 * 1' (UTC;
#: day-of-month AND day-of-week)`` (a Celery crontab restricting both day fields)
_CUSTOM_ZONE = re.compile(r"\((?P<zone>[A-Za-z][\w+\-]*(?:/[\w+\-]+)*)[;)]")


def effective_timezone(info: JobInfo, default: object = None) -> str | None:
    """The time zone job ``info``'s cron slots run in: the one its effective schedule
    names (an override's or a dynamic job's, a job registered by another instance),
    else its ``timezone`` option, else ``default``; for a custom schedule the zone its
    description names, if any; None for a job that is not cron."""
    if info.kind == "custom":
        named = _CUSTOM_ZONE.search(info.schedule)
        return named["zone"] if named and _is_zone(named["zone"]) else None
    if info.kind != "cron":
        return None
    found = _CRON_ZONE.fullmatch(info.schedule)
    if found:
        return found["zone"]
    zone = info.options.get("timezone", default)
    return None if zone is None else str(zone)


@functools.lru_cache(maxsize=1)
def _zones() -> frozenset[str]:
    import zoneinfo

    return frozenset(zoneinfo.available_timezones())


def _is_zone(name: str) -> bool:
    return name in _zones()


def job_rows(scheduler: Scheduler | None = None) -> list[JobRow]:
    """Every job with its last outcome and current runner."""
    scheduler = scheduler or get_scheduler()
    default_tz = scheduler.core.options.defaults.get("timezone")
    rows = []
    for info in job_infos(scheduler):
        recent = history(info.name, 5, scheduler)
        running = [r for r in recent if r.status == "running"]
        timezone = effective_timezone(info, default_tz)
        rows.append(JobRow(info, timezone, recent[0] if recent else None,
                           running[0].instance_id if running else None))
    return rows


def history_all(scheduler: Scheduler | None = None, *, job: str | None = None,
                status: str | None = None, reason: str | None = None,
                instance: str | None = None, search: str | None = None,
                since: datetime | None = None, until: datetime | None = None,
                per_job: int = HISTORY_SCAN) -> list[RunRecord]:
    """Attempts of all jobs (or ``job``), newest first, filtered.

    The core reads history one job at a time, so this reads up to ``per_job`` attempts
    of every job known to the store and merges them.
    """
    scheduler = scheduler or get_scheduler()
    store = direct.store_of(scheduler)
    if store is not None:
        query = direct.HistoryQuery(job, status, reason, instance, search, since, until)
        return direct.as_records(direct.attempts(store, query)[:per_job])
    names = [job] if job else job_names(scheduler)
    if search:
        names = [name for name in names if search.lower() in name.lower()]
    records: list[RunRecord] = []
    for name in names:
        records.extend(scheduler.history(name, per_job))
    records = [r for r in records
               if (status is None or r.status == status)
               and (reason is None or r.reason == reason)
               and (instance is None or r.instance_id == instance)
               and (since is None or r.started_at >= since)
               and (until is None or r.started_at < until)]
    return sorted(records, key=lambda r: r.started_at, reverse=True)


def find_run(name: str, slot: int, attempt: int, manual: bool,
             scheduler: Scheduler | None = None) -> RunRecord | None:
    """One attempt, looked up in the job's history."""
    for record in history(name, HISTORY_SCAN, scheduler):
        if (record.slot, record.attempt, record.manual) == (slot, attempt, manual):
            return record
    return None


#: a manual run was not requested: one is pending or running, or the job is gone (the
#: core's error, raised the same on every store; ``reason`` says which)
RunRefused = TriggerRefusedError


def request_run(name: str, data: Any = None, scheduler: Scheduler | None = None) -> JobInfo:
    """Ask the store for a manual run that exactly one running instance executes.

    Goes through the core's ``trigger(name, data)`` (the ``"django"`` store: written in
    this thread and transaction, by the same rules); ``data`` must be JSON and is stored
    until the run starts (no secrets). Unknown jobs raise ``LookupError``; a second
    request while one is pending or running, or a request for a gone job, raises
    ``RunRefused`` (``anarchon.TriggerRefusedError``) on every store. Requests expire
    unclaimed after the backend's ``trigger_ttl``. Returns the job's description, read
    for the checks (``last_registered`` says whether an instance runs it).
    """
    scheduler = scheduler or get_scheduler()
    infos = {info.name: info for info in job_infos(scheduler)}
    if name not in infos:
        raise LookupError(f"unknown job {name!r}; jobs: {', '.join(infos) or 'none'}")
    store = direct.store_of(scheduler)
    if store is not None:
        if direct.gone(scheduler, store, name, infos[name]):
            raise TriggerRefusedError(direct.gone_message(name), name=name, reason="gone")
        payload, exclusive = scheduler.core.trigger_args(name, data)
        store.request_trigger(name, payload, exclusive, wait=LOCK_WAIT)
        return infos[name]
    if infos[name].gone:
        raise TriggerRefusedError(direct.gone_message(name), name=name, reason="gone")
    scheduler.trigger(name, data=data)
    return infos[name]


def instances(records: Sequence[RunRecord]) -> list[str]:
    """Distinct instance ids in ``records``, sorted."""
    return sorted({record.instance_id for record in records})
