"""System checks for the ``ANARCHON`` setting (ids ``anarchon.E0xx`` / ``anarchon.W0xx``).

Ordinary checks do no I/O. Reaching the store is a ``deploy`` check
(``manage.py check --deploy``).

=============== ===========================================================================
id              meaning
=============== ===========================================================================
anarchon.E001   ``ANARCHON`` is not a dict
anarchon.E002   unknown key, or ``OPTIONS``/``SCHEDULER``/``JOBS``/``AUTODISCOVER`` malformed
anarchon.E003   backend unknown, not importable, or not buildable from ``OPTIONS``
anarchon.E004   invalid ``SCHEDULER`` option (unknown name, bad duration or timezone)
anarchon.E005   invalid ``JOBS`` entry (callable, cron, interval, timezone, option)
anarchon.E006   two jobs with the same name (settings and decorators)
anarchon.E007   ``heartbeat`` not shorter than ``lease``
anarchon.E008   (deploy) the store cannot be reached
anarchon.W001   ``USE_TZ = False``
anarchon.W002   ``heartbeat`` longer than a third of ``lease``: one slow renewal loses it
anarchon.W003   (deploy) the store is SQLite: every instance must run on one host
=============== ===========================================================================
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from django.apps import AppConfig
from django.conf import settings
from django.core import checks

from anarchon.durations import parse_duration
from anarchon.jobs.definition import SchedulerOptions, check_heartbeat, resolve_job
from anarchon_django.settings.backend import backend_kind, build_backend
from anarchon_django.settings.conf import SCHEDULER_EXTRAS, AnarchonSettings, SettingsError, parse
from anarchon_django.settings.declarations import declared

TAG = "anarchon"


def _error(check_id: str, message: str, hint: str | None = None) -> checks.CheckMessage:
    level = checks.Warning if ".W" in check_id else checks.Error
    return level(message, hint=hint, id=check_id, obj="settings.ANARCHON")


def _parsed() -> tuple[AnarchonSettings | None, list[checks.CheckMessage]]:
    try:
        return parse(getattr(settings, "ANARCHON", None)), []
    except SettingsError as exc:
        return None, [_error(exc.check_id, exc.message, exc.hint)]


@checks.register(TAG)
def check_settings(app_configs: Sequence[AppConfig] | None = None,
                   **kwargs: Any) -> list[checks.CheckMessage]:
    """Everything that can be checked without I/O."""
    config, errors = _parsed()
    if config is None:
        return errors
    if not settings.USE_TZ:
        errors.append(_error("anarchon.W001", "USE_TZ is False: anarchon schedules in aware "
                             "UTC datetimes", "set USE_TZ = True"))
    try:
        build_backend(config)
    except SettingsError as exc:
        errors.append(_error(exc.check_id, exc.message, exc.hint))
    except Exception as exc:
        errors.append(_error("anarchon.E003", f"ANARCHON backend: {exc}"))
    scheduler = _scheduler_options(config, errors)
    names: dict[str, str] = {d.name: d.origin for d in declared()}
    for entry in config.jobs:
        where = f"ANARCHON['JOBS'][{entry.name!r}]"
        if entry.name in names:
            errors.append(_error("anarchon.E006", f"job {entry.name!r} is declared twice: in "
                                 f"{where} and by {names[entry.name]}",
                                 "job names must be unique"))
            continue
        names[entry.name] = where
        errors.extend(_check_job(entry.kind, entry.name, entry.when, entry.callable,
                                 entry.options, scheduler, where))
    return errors


def _scheduler_options(config: AnarchonSettings,
                       errors: list[checks.CheckMessage]) -> SchedulerOptions:
    options = {k: v for k, v in config.scheduler_arguments().items()
               if k not in SCHEDULER_EXTRAS}
    try:
        lease = parse_duration(options.get("lease", 30.0), option="lease")
        heartbeat = parse_duration(options.get("heartbeat", 5.0), option="heartbeat")
    except (TypeError, ValueError) as exc:
        errors.append(_error("anarchon.E004", f"ANARCHON['SCHEDULER']: {exc}"))
        return SchedulerOptions.build({})
    try:
        check_heartbeat(heartbeat, lease)
    except ValueError as exc:
        errors.append(_error("anarchon.E007", f"ANARCHON['SCHEDULER']: {exc}",
                             "e.g. lease '30s' with heartbeat '5s'"))
        return SchedulerOptions.build({})
    if heartbeat > lease / 3:
        errors.append(_error("anarchon.W002", f"ANARCHON['SCHEDULER']: heartbeat "
                             f"({heartbeat:g}s) is more than a third of lease ({lease:g}s); "
                             "one slow renewal lets a backup take over",
                             "keep heartbeat <= lease / 3"))
    try:
        return SchedulerOptions.build(options)
    except (TypeError, ValueError) as exc:
        errors.append(_error("anarchon.E004", f"ANARCHON['SCHEDULER']: {exc}"))
        return SchedulerOptions.build({})


def _check_job(kind: str, name: str, when: Any, target: str, options: dict[str, Any],
               scheduler: SchedulerOptions, where: str) -> list[checks.CheckMessage]:
    from django.utils.module_loading import import_string

    try:
        handler = import_string(target)
    except ImportError as exc:
        return [_error("anarchon.E005", f"{where}['callable'] {target!r} cannot be imported: "
                       f"{exc}")]
    try:
        resolve_job(kind, name, when, options, handler=handler, scheduler=scheduler)
    except (TypeError, ValueError) as exc:
        return [_error("anarchon.E005", f"{where}: {exc}")]
    return []


@checks.register(TAG, deploy=True)
def check_store(app_configs: Sequence[AppConfig] | None = None,
                **kwargs: Any) -> list[checks.CheckMessage]:
    """Deploy checks: SQLite means one host; the store must answer."""
    config, _ = _parsed()
    if config is None:
        return []
    messages = []
    if backend_kind(config) == "sqlite":
        messages.append(_error(
            "anarchon.W003", "the anarchon store is a SQLite file: every instance must run on "
            "this host (file locks do not work across machines or over NFS)",
            "for several hosts use PostgreSQL (a PostgreSQL database with BACKEND 'django') "
            "or Redis"))
    try:
        backend = build_backend(config)
    except Exception:
        return messages  # reported by check_settings
    try:
        asyncio.run(_reach(backend))
    except Exception as exc:
        messages.append(_error("anarchon.E008", f"the anarchon store ({backend.name}) cannot "
                               f"be reached: {exc}", "start it, or fix ANARCHON['BACKEND']"))
    return messages


async def _reach(backend: Any) -> None:
    try:
        await asyncio.wait_for(backend.open(), timeout=10)
        await backend.known_jobs()
    finally:
        await backend.close()
