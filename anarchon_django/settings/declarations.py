"""Jobs declared with ``anarchon_django.every/cron/at`` and in ``ANARCHON["JOBS"]``.

Declaring a job does no I/O: it records ``(kind, name, when, handler, options)`` and checks
the schedule and options with the core's own rules. Schedulers are built from these
declarations (see [`anarchon_django.control.runtime`][anarchon_django.control.runtime]), so
settings can change between builds.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from anarchon.jobs.definition import resolve_job
from anarchon.jobs.name_checks import check_job_name

F = TypeVar("F", bound=Callable[..., Any])

KINDS = ("every", "cron", "at")


@dataclass(frozen=True)
class Declaration:
    """One job as declared: the core's ``every/cron/at`` arguments, kept for later."""

    kind: str
    name: str
    when: Any
    handler: Callable[..., Any]
    options: Mapping[str, Any] = field(default_factory=dict)
    #: where it was declared: ``"module:function"`` or ``"settings.ANARCHON['JOBS']"``
    origin: str = ""


_lock = threading.Lock()
_declared: dict[str, Declaration] = {}


def check(declaration: Declaration) -> None:
    """Check a declaration with the core's rules (``ValueError``/``TypeError``)."""
    check_job_name(declaration.name)
    resolve_job(declaration.kind, declaration.name, declaration.when,
                dict(declaration.options), handler=declaration.handler)


def declare(declaration: Declaration) -> None:
    """Add a decorated job; a second job with the same name raises ``ValueError``."""
    check(declaration)
    with _lock:
        existing = _declared.get(declaration.name)
        if existing is not None and existing.origin != declaration.origin:
            raise ValueError(f"job {declaration.name!r} is already declared by "
                             f"{existing.origin}; job names must be unique")
        _declared[declaration.name] = declaration


def declared() -> list[Declaration]:
    """Jobs declared with the decorators so far, in declaration order."""
    with _lock:
        return list(_declared.values())


def forget(name: str) -> None:
    """Drop a decorated job (for tests)."""
    with _lock:
        _declared.pop(name, None)


def _decorator(kind: str, name: str, when: Any, options: dict[str, Any]) -> Callable[[F], F]:
    check_job_name(name)
    if when is None:
        raise TypeError(f"{kind}({name!r}) needs a schedule")
    # Fail at the decorator line for bad schedules and options, like the core does.
    resolve_job(kind, name, when, options)

    def decorate(func: F) -> F:
        if not callable(func):
            raise TypeError(f"{kind}({name!r}) decorates a function, got {func!r}")
        origin = f"{getattr(func, '__module__', '?')}:{getattr(func, '__qualname__', func)}"
        declare(Declaration(kind, name, when, func, dict(options), origin))
        return func

    return decorate


def every(name: str, interval: Any, **options: Any) -> Callable[[F], F]:
    """Declare ``@every("sync", "10s", **options)``: slots on a grid from the epoch."""
    return _decorator("every", name, interval, options)


def cron(name: str, expr: str, **options: Any) -> Callable[[F], F]:
    """Declare ``@cron("digest", "0 2 * * *", timezone="Europe/Berlin", **options)``.

    ``timezone`` defaults to ``ANARCHON["SCHEDULER"]["timezone"]``, else ``TIME_ZONE``.
    """
    return _decorator("cron", name, expr, options)


def at(name: str, when: Any, **options: Any) -> Callable[[F], F]:
    """Declare ``@at("launch", "2026-12-24T18:00:00Z")``: one run at an aware instant."""
    return _decorator("at", name, when, options)


@dataclass(frozen=True)
class HandlerDeclaration:
    """A callable offered for dynamic jobs under ``name`` (``@handler``)."""

    name: str
    handler: Callable[..., Any]
    #: ``"module:function"``
    origin: str = ""


_handlers: dict[str, HandlerDeclaration] = {}


def handler(name: str | Callable[..., Any] | None = None) -> Any:
    """Offer a callable for dynamic jobs: ``@handler("report")`` or ``@handler`` (the
    function's name).

    Put it in an app's ``jobs`` module (autodiscovered like the jobs): every
    ``manage.py anarchon run`` offers it (``Scheduler.handler()``), so the admin's
    dynamic-job form lists it and the instances run the dynamic jobs that name it
    (``ctx.params`` holds the job's stored params). A second callable under a name
    already offered raises ``ValueError``.
    """
    if callable(name):
        return handler(getattr(name, "__name__", None))(name)
    if not isinstance(name, str) or not name or name != name.strip():
        raise TypeError(f"handler name must be a non-empty str, got {name!r}")

    def decorate(func: F) -> F:
        if not callable(func):
            raise TypeError(f"handler({name!r}) decorates a function, got {func!r}")
        origin = f"{getattr(func, '__module__', '?')}:{getattr(func, '__qualname__', func)}"
        with _lock:
            existing = _handlers.get(name)
            if existing is not None and existing.origin != origin:
                raise ValueError(f"handler {name!r} is already offered by {existing.origin}; "
                                 "handler names must be unique")
            _handlers[name] = HandlerDeclaration(name, func, origin)
        return func

    return decorate


def handlers() -> list[HandlerDeclaration]:
    """Handlers offered with ``@handler`` so far, in declaration order."""
    with _lock:
        return list(_handlers.values())


def forget_handler(name: str) -> None:
    """Drop a handler (for tests)."""
    with _lock:
        _handlers.pop(name, None)

