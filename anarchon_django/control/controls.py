"""Runtime control for the admin pages and ``manage.py anarchon``: the core's calls
(``pause``, ``resume``, ``reschedule``, ``add_job``, ``remove_job``, ``changes``,
``offered_handlers``, ``jobs``) on the process-wide scheduler, and how a change reads.

Nothing here touches the store's tables: every change goes through the core, which
versions it, fences old claims and records it in the job's change log with ``by=``. On
the ``"django"`` store the core's calls run in the caller's thread and transaction
(``anarchon_django.control.direct_control``): a page never waits for a lock its own request holds.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, cast

from anarchon import JobInfo, Scheduler
from anarchon.backends.capabilities import ControlStore
from anarchon.control.changes import Change
from anarchon_django.control import direct_control
from anarchon_django.control.runtime import get_scheduler, job_infos
from anarchon_django.settings import declarations

#: how many changes the job page lists
CHANGES_SHOWN = 20

# ScheduleSpec.describe() (``every 300s +10s``) and the code's (``every 5m (offset 10s)``)
_EVERY = re.compile(r"every (?P<every>\S+)(?: \+(?P<offset>\S+)| \(offset (?P<code>[^)]+)\))?")
_CRON = re.compile(r"cron '?(?P<cron>.+?)'? \((?P<timezone>[^()]+)\)")


def _scheduler(scheduler: Scheduler | None) -> Scheduler:
    return scheduler or get_scheduler()


def writer(scheduler: Scheduler | None = None) -> Scheduler:
    """The scheduler whose control calls to make: on the ``"django"`` store, one that
    runs them in this thread and transaction (``direct_control.HereScheduler``, the
    same synchronous calls); else the process-wide scheduler itself."""
    chosen = _scheduler(scheduler)
    here = direct_control.here(chosen)
    return chosen if here is None else cast(Scheduler, here)


def _call(scheduler: Scheduler | None, method: str, *args: Any, **kwargs: Any) -> Any:
    """``scheduler.<method>(...)``; on the ``"django"`` store, in this thread."""
    return getattr(writer(scheduler), method)(*args, **kwargs)


def supported(scheduler: Scheduler | None = None) -> bool:
    """Whether the configured backend supports runtime control."""
    return isinstance(_scheduler(scheduler).backend, ControlStore)


def unsupported_reason(scheduler: Scheduler | None = None) -> str:
    """Why runtime control is not available here (the backend's name in it)."""
    backend = _scheduler(scheduler).backend
    return (f"the backend {backend.name} does not support runtime control (pause, "
            "reschedule, dynamic jobs)")


def author(username: str) -> str:
    """The ``by=`` of a change made by a Django user."""
    return f"django:{username}"


def find(name: str, scheduler: Scheduler | None = None) -> JobInfo | None:
    """Job ``name`` as ``jobs()`` reports it (paused, source, effective schedule)."""
    return next((info for info in job_infos(_scheduler(scheduler)) if info.name == name),
                None)


def dynamic_jobs(scheduler: Scheduler | None = None) -> list[JobInfo]:
    """The dynamic jobs (``add_job()``), by name."""
    return [info for info in job_infos(_scheduler(scheduler)) if info.source == "dynamic"]


def handler_names(scheduler: Scheduler | None = None) -> list[str]:
    """Handler names that running instances offer or this project declares
    (``@anarchon_django.handler``: its ``manage.py anarchon run`` offers them), sorted."""
    offers: dict[str, list[str]] = _call(scheduler, "offered_handlers")
    declared = {offered.name for offered in declarations.handlers()}
    return sorted(declared | {name for names in offers.values() for name in names})


def changes(name: str, count: int = CHANGES_SHOWN,
            scheduler: Scheduler | None = None) -> list[Change]:
    """Job ``name``'s newest changes, newest first."""
    found: list[Change] = _call(scheduler, "changes", name, count)
    return found


def pause(name: str, by: str, scheduler: Scheduler | None = None) -> Change:
    """Pause job ``name``; a job paused already is refused (``AlreadyDone``): one change
    per click. The check is part of the core's compare-and-set (re-read on every retry),
    so of two concurrent clicks one pauses and the other is refused, on every store."""
    return _toggle(name, True, by, scheduler)


def resume(name: str, by: str, scheduler: Scheduler | None = None) -> Change:
    """Resume job ``name``; a job that is not paused is refused (``AlreadyDone``)."""
    return _toggle(name, False, by, scheduler)


def _toggle(name: str, paused: bool, by: str, scheduler: Scheduler | None) -> Change:
    chosen = _scheduler(scheduler)
    here = direct_control.here(chosen)
    if here is not None:
        return here.pause(name, by=by) if paused else here.resume(name, by=by)
    # the core's change with the checking mutation, on the scheduler's own loop
    change: Change = chosen.run_coroutine(chosen.core.control.change(
        name, "pause" if paused else "resume", direct_control.toggle(name, paused), {}, by))
    return change


def reschedule(name: str, by: str, scheduler: Scheduler | None = None,
               **schedule: Any) -> Change:
    """``every=``/``offset=``, ``cron=``/``timezone=`` or ``reset=True``."""
    change: Change = _call(scheduler, "reschedule", name, by=by, **schedule)
    return change


def add_job(name: str, by: str, scheduler: Scheduler | None = None, **job: Any) -> Change:
    """``add_job(name, handler=..., every=|cron=|at=, params=, replace=, **options)``."""
    change: Change = _call(scheduler, "add_job", name, by=by, **job)
    return change


def remove_job(name: str, by: str, scheduler: Scheduler | None = None) -> Change:
    change: Change = _call(scheduler, "remove_job", name, by=by)
    return change


def describe(change: Change) -> str:
    """One line for a change: ``paused “greet” (version 3)``."""
    detail = change.detail
    what = {
        "pause": f"paused “{change.name}”",
        "resume": f"resumed “{change.name}”",
        "reschedule": f"rescheduled “{change.name}” to {detail.get('schedule', '?')}",
        "reset": f"reset “{change.name}” to the schedule in its code",
        "add": f"added dynamic job “{change.name}” ({detail.get('handler', '?')}, "
               f"{detail.get('schedule', '?')})",
        "update": f"updated dynamic job “{change.name}” ({detail.get('handler', '?')}, "
                  f"{detail.get('schedule', '?')})",
        "remove": f"removed dynamic job “{change.name}”",
    }.get(change.action, f"{change.action} “{change.name}”")
    return f"{what} (version {change.version})"


def sentence(change: Change) -> str:
    """``describe(change)`` starting with a capital."""
    text = describe(change)
    return text[:1].upper() + text[1:]


@dataclass(frozen=True)
class Schedule:
    """A job's effective schedule split into the form's fields."""

    kind: str
    every: str = ""
    offset: str = ""
    cron: str = ""
    timezone: str = ""
    at: str = ""


def split_schedule(info: JobInfo, default_timezone: str = "UTC") -> Schedule:
    """``info.schedule`` (``every 300s +10s``, ``cron 0 3 * * * (UTC)``, ``at …``) as
    fields; what cannot be read is left blank."""
    text = info.schedule
    every = _EVERY.fullmatch(text)
    if every:
        return Schedule("every", every=every["every"],
                        offset=every["offset"] or every["code"] or "")
    cron = _CRON.fullmatch(text)
    if cron:
        return Schedule("cron", cron=cron["cron"], timezone=cron["timezone"])
    if info.kind == "at" and text.startswith("at "):
        return Schedule("at", at=text[3:])
    if info.kind == "cron":
        zone = str(info.options.get("timezone", default_timezone))
        return Schedule("cron", cron=text.removeprefix("cron ").strip(), timezone=zone)
    return Schedule(info.kind or "every")


def error_text(exc: BaseException) -> str:
    """The core's message for ``exc`` (its first argument), on one line."""
    message = exc.args[0] if exc.args and isinstance(exc.args[0], str) else str(exc)
    return " ".join(message.split())
