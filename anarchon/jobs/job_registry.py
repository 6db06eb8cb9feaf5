"""Registering jobs: chainable calls, decorators, decorated methods and ``register(obj)``.

``JobRegistry`` is the scheduler's registration component (the scheduler forwards
``every``/``cron``/``at``/``schedule``/``register``/``remove``/``next_runs`` to it).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol, TypeVar, runtime_checkable

from ..backends.base import Backend
from ..backends.frameworks import check_framework
from ..clock import Clock
from ..errors import JobNotFoundError
from ..schedules.kinds import ms_to_datetime
from .definition import Handler, Job, SchedulerOptions, applies, resolve_job
from .name_checks import check_job_name
from .scheduler_table import registry_target
from .table import JobTable

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")

#: where a decorated method registers: a scheduler, a named scheduler, or nowhere (None)
Target = Any


@dataclass(frozen=True)
class Mark:
    """A job declared on a method, registered per instance."""

    kind: str
    name: str | None
    when: Any
    options: Mapping[str, Any]
    target: Target


class JobMethod:
    """A method carrying job marks. Instances of its class register the jobs on construction.

    Registering on construction wraps the class's ``__init__`` once; a subclass that does
    not call ``super().__init__()`` does not register them.
    """

    def __init__(self, func: Callable[..., Any], marks: list[Mark]) -> None:
        self.func = func
        self.marks = marks
        functools.update_wrapper(self, func)

    def __set_name__(self, owner: type, name: str) -> None:
        if any(mark.target is not None for mark in self.marks):
            _hook_init(owner)

    def __get__(self, obj: object, objtype: type | None = None) -> Any:
        return self.func.__get__(obj, objtype) if obj is not None else self

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.func(*args, **kwargs)


def _is_method_definition(func: Callable[..., Any]) -> bool:
    """True for a function being defined in a class body (decorators run before the class)."""
    parts = getattr(func, "__qualname__", "").split(".")
    return len(parts) >= 2 and parts[-2] != "<locals>"


def _hook_init(cls: type) -> None:
    if "__anarchon_hooked__" in cls.__dict__:
        return
    original = cls.__init__  # type: ignore[misc]

    @functools.wraps(original)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        outermost = next(c for c in type(self).__mro__ if "__anarchon_hooked__" in c.__dict__)
        if outermost is cls:
            for attr, mark in method_marks(type(self)):
                if mark.target is not None:
                    target = _resolve_target(mark.target)
                    name = mark.name or f"{type(self).__name__}-{attr}"
                    target.declare_job(mark.kind, name, mark.when, getattr(self, attr),
                                   mark.options)

    cls.__init__ = __init__  # type: ignore[misc]
    cls.__anarchon_hooked__ = True  # type: ignore[attr-defined]


@runtime_checkable
class JobSink(Protocol):
    """Anything jobs can be added to: a scheduler, or a named scheduler not configured yet."""

    def declare_job(self, kind: str, name: str, when: Any, handler: Handler,
                    options: Mapping[str, Any]) -> None:
        """Check and add one job (``kind``: every, cron or at)."""


def _resolve_target(target: Target) -> JobSink:
    if isinstance(target, str):
        sink: JobSink = registry_target(target)
        return sink
    if not isinstance(target, JobSink):
        raise TypeError(f"cannot register jobs on {target!r}")
    return target


def method_marks(cls: type) -> list[tuple[str, Mark]]:
    """``(attribute, mark)`` for every job-marked method of ``cls`` (subclasses win)."""
    seen: dict[str, JobMethod] = {}
    for klass in reversed(cls.__mro__):
        for attr, value in vars(klass).items():
            if isinstance(value, JobMethod):
                seen[attr] = value
            elif attr in seen:
                del seen[attr]
    return [(attr, mark) for attr, method in seen.items() for mark in method.marks]


def make_decorator(kind: str, name: str | None, when: Any, options: Mapping[str, Any],
                   target: Target, add: Callable[[str, str, Any, Handler, Mapping[str, Any]],
                                                 object] | None) -> Callable[[Any], Any]:
    """A decorator registering functions at once and methods per instance."""

    def decorate(func: Any) -> Any:
        if isinstance(func, JobMethod):
            func.marks.append(Mark(kind, name, when, options, target))
            return func
        if not callable(func):
            raise TypeError(f"{kind}() decorates a function, got {func!r}")
        if _is_method_definition(func):
            return JobMethod(func, [Mark(kind, name, when, options, target)])
        if add is None:
            raise TypeError(f"{kind}() with scheduler=None only marks methods; "
                            "register a plain function on a scheduler")
        add(kind, name or func.__name__, when, func, options)
        return func

    return decorate


#: what ``every``/``cron``/``at`` need besides a name, as their errors say it
_WHEN_NEEDED = {
    "every": "an interval, e.g. every('sync', '10s')",
    "cron": "an expression, e.g. cron('digest', '0 * * * *')",
    "at": "a time, e.g. at('launch', '2026-12-24T18:00Z')",
}


class JobRegistry:
    """The jobs of one scheduler and the ways to add them. No I/O happens here.

    The scheduler owns one and forwards its registration calls to it. The registry
    writes the scheduler's ``JobTable`` and tells the engine through ``added(job)`` and
    ``removed(name)``; ``clock`` is the one slots are computed on (``next_runs()``).
    """

    def __init__(self, backend: Backend, options: SchedulerOptions, clock: Clock,
                 jobs: JobTable, *, added: Callable[[Job], None],
                 removed: Callable[[str], None]) -> None:
        self.backend = backend
        self.options = options
        self.clock = clock
        self.jobs = jobs
        #: the engine starts scheduling a job added while it runs
        self.added = added
        #: the engine stops scheduling a removed job
        self.removed = removed

    def add(self, kind: str, name: str | None, when: Any, handler: Handler | None,
            options: Mapping[str, Any], chain: T) -> T | Callable[[F], F]:
        """``every``/``cron``/``at``/``schedule`` of the scheduler ``chain``: with a
        handler, add the job and return ``chain``; without, return a decorator that
        adds the function (or, in a class body, marks the method for every instance of
        its class, registered on ``chain``) and returns it unchanged."""
        if kind in _WHEN_NEEDED and when is None:
            raise TypeError(f"{kind}({name!r}) needs {_WHEN_NEEDED[kind]}")
        if name is not None:
            check_job_name(name)
        if handler is None:
            self._check(kind, name or "<decorated>", when, options)
            decorator: Callable[[F], F] = make_decorator(kind, name, when, options, chain,
                                                         self.declare_job)
            return decorator
        if name is None:
            name = getattr(handler, "__name__", None)
            if not isinstance(name, str):
                raise TypeError(f"{kind}() needs a job name for handler {handler!r}")
        self.declare_job(kind, name, when, handler, options)
        return chain

    def _check(self, kind: str, name: str, when: Any, options: Mapping[str, Any]) -> Job:
        return resolve_job(kind, name, when, options, scheduler=self.options,
                           backend=self.backend)

    def declare_job(self, kind: str, name: str, when: Any, handler: Handler,
                    options: Mapping[str, Any], *, framework: str | None = None) -> None:
        """Check and add one job: the protocol every registration path ends in
        (chainable calls, decorators, class-body marks, ``register(obj)``, frameworks).

        ``framework``: the layer declaring it (``"celery"``, ``"dramatiq"``), kept with
        its registration in the store and shown as
        [`JobInfo.framework`][anarchon.history.JobInfo]; ``None`` for a plain job.
        """
        check_job_name(name)
        check_framework(framework)
        if name in self.jobs:
            raise ValueError(f"job {name!r} is already registered on this scheduler; job "
                             "names must be unique (use prefix= for per-object jobs)")
        if not callable(handler):
            raise TypeError(f"job {name!r}: handler must be callable, got {handler!r}")
        job = self._check(kind, name, when, options)
        job = dataclasses.replace(job, handler=handler, framework=framework)
        self.jobs.put(job)
        self.added(job)

    def register(self, obj: object, prefix: str = "",
                 defaults: Mapping[str, Any] | None = None) -> list[str]:
        """Register the job-marked methods of ``obj``; returns the job names.

        Names are ``prefix`` + the mark's name (or ``ClassName-method``). ``defaults`` fill
        options the marks leave out (``data`` dicts merge, the mark's keys winning).
        """
        if not isinstance(prefix, str):
            raise TypeError(f"prefix must be a str, got {type(prefix).__name__}")
        defaults = dict(defaults or {})
        names = []
        for attr, mark in method_marks(type(obj)):
            options = _with_defaults(mark, defaults)
            name = prefix + (mark.name or f"{type(obj).__name__}-{attr}")
            self.declare_job(mark.kind, name, mark.when, getattr(obj, attr), options)
            names.append(name)
        if not names:
            raise ValueError(f"{type(obj).__name__} has no methods decorated with "
                             "every/cron/at")
        return names

    def remove(self, name: str) -> None:
        """Stop scheduling ``name`` on this instance (history stays in the store)."""
        self.job(name)
        self.jobs.drop(name)
        self.removed(name)

    def job(self, name: str) -> Job:
        """Job ``name``, or [`JobNotFoundError`][anarchon.errors.JobNotFoundError]."""
        try:
            return self.jobs[name]
        except KeyError:
            raise JobNotFoundError(f"no job named {name!r}; registered: "
                                   f"{sorted(self.jobs) or 'none'}") from None

    def next_runs(self, name: str, count: int = 5, after: datetime | None = None
                  ) -> list[datetime]:
        """The next ``count`` slots of ``name`` after ``after`` (default now), as aware UTC
        datetimes. Pure: the public way to see the slot maths, DST included."""
        job = self.job(name)
        if after is None:
            start = int(self.clock.time() * 1000)
        elif isinstance(after, datetime):
            if after.tzinfo is None:
                raise ValueError(f"after must be an aware datetime, got naive {after!r}")
            start = math.floor(after.timestamp() * 1000)
        else:
            raise TypeError(f"after must be an aware datetime, got {type(after).__name__}")
        slots: list[datetime] = []
        while len(slots) < count:
            slot = job.schedule.next_after(start)
            if slot is None:
                break
            slots.append(ms_to_datetime(slot))
            start = slot
        return slots


def _with_defaults(mark: Mark, defaults: Mapping[str, Any]) -> dict[str, Any]:
    options = dict(mark.options)
    for key, value in defaults.items():
        if key in options:
            if key == "data" and isinstance(value, dict) and isinstance(options[key], dict):
                options[key] = {**value, **options[key]}
        elif applies(key, mark.kind):
            options[key] = value
    return options
