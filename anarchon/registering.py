"""Registering jobs: chainable calls, decorators, decorated methods and ``register(obj)``."""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol, TypeVar, overload

from .backends.base import Backend
from .backends.frameworks import check_framework
from .errors import JobNotFoundError
from .jobs import Handler, Job, applies, resolve_job, resolve_scheduler_options
from .named import registry_target
from .names import check_job_name
from .slots import Schedule, ms_to_datetime

F = TypeVar("F", bound=Callable[..., Any])
R = TypeVar("R", bound="JobRegistry")

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


class JobSink(Protocol):
    """Anything jobs can be added to: a scheduler, or a named scheduler not configured yet."""

    def declare_job(self, kind: str, name: str, when: Any, handler: Handler,
                    options: Mapping[str, Any]) -> None:
        """Check and add one job (``kind``: every, cron or at)."""


def _resolve_target(target: Target) -> JobSink:
    if isinstance(target, str):
        sink: JobSink = registry_target(target)
        return sink
    if not isinstance(target, JobRegistry):
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


class JobRegistry:
    """The jobs of one scheduler and the ways to add them. No I/O happens here."""

    def __init__(self, backend: Backend, options: Mapping[str, Any]) -> None:
        self.backend = backend
        self.options = resolve_scheduler_options(options, backend)
        self._jobs: dict[str, Job] = {}

    @overload
    def every(self, name: str | None, interval: Any, handler: None = None,
              **options: Any) -> Callable[[F], F]: ...

    @overload
    def every(self: R, name: str | None, interval: Any, handler: Handler,
              **options: Any) -> R: ...

    def every(self, name: str | None = None, interval: Any = None, handler: Handler | None = None,
              **options: Any) -> Any:
        """Run every ``interval`` on the UTC epoch grid (plus ``offset``).

        With a handler: registers and returns the scheduler (chainable). Without: returns a
        decorator that registers the function (or, in a class body, the method for every
        instance) and returns it unchanged.
        """
        if interval is None:
            raise TypeError(f"every({name!r}) needs an interval, e.g. every('sync', '10s')")
        return self._register("every", name, interval, handler, options)

    @overload
    def cron(self, name: str | None, expr: str, handler: None = None,
             **options: Any) -> Callable[[F], F]: ...

    @overload
    def cron(self: R, name: str | None, expr: str, handler: Handler, **options: Any) -> R: ...

    def cron(self, name: str | None = None, expr: Any = None, handler: Handler | None = None,
             **options: Any) -> Any:
        """Run on a cron expression (5 fields, or 6 with seconds) in ``timezone``."""
        if expr is None:
            raise TypeError(f"cron({name!r}) needs an expression, e.g. cron('digest', '0 * * * *')")
        return self._register("cron", name, expr, handler, options)

    @overload
    def at(self, name: str | None, when: Any, handler: None = None,
           **options: Any) -> Callable[[F], F]: ...

    @overload
    def at(self: R, name: str | None, when: Any, handler: Handler, **options: Any) -> R: ...

    def at(self, name: str | None = None, when: Any = None, handler: Handler | None = None,
           **options: Any) -> Any:
        """Run once at ``when``: an aware datetime, epoch seconds or ISO-8601 string."""
        if when is None:
            raise TypeError(f"at({name!r}) needs a time, e.g. at('launch', '2026-12-24T18:00Z')")
        return self._register("at", name, when, handler, options)

    @overload
    def schedule(self, name: str | None, schedule: Schedule, handler: None = None,
                 **options: Any) -> Callable[[F], F]: ...

    @overload
    def schedule(self: R, name: str | None, schedule: Schedule, handler: Handler,
                 **options: Any) -> R: ...

    def schedule(self, name: str | None = None, schedule: Schedule | None = None,
                 handler: Handler | None = None, **options: Any) -> Any:
        """Run on a custom [`Schedule`][anarchon.slots.Schedule] (pure and identical on every
        instance, e.g. a framework's own calendar rules). Options follow its ``kind``."""
        if not isinstance(schedule, Schedule):
            raise TypeError(f"schedule({name!r}) needs an anarchon.slots.Schedule, "
                            f"got {schedule!r}")
        return self._register(schedule.kind, name, schedule, handler, options)

    def _register(self, kind: str, name: str | None, when: Any, handler: Handler | None,
                  options: Mapping[str, Any]) -> Any:
        if name is not None:
            check_job_name(name)
        if handler is None:
            self._check(kind, name or "<decorated>", when, options)
            return make_decorator(kind, name, when, options, self, self.declare_job)
        if name is None:
            name = getattr(handler, "__name__", None)
            if not isinstance(name, str):
                raise TypeError(f"{kind}() needs a job name for handler {handler!r}")
        self.declare_job(kind, name, when, handler, options)
        return self

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
        if name in self._jobs:
            raise ValueError(f"job {name!r} is already registered on this scheduler; job "
                             "names must be unique (use prefix= for per-object jobs)")
        if not callable(handler):
            raise TypeError(f"job {name!r}: handler must be callable, got {handler!r}")
        job = self._check(kind, name, when, options)
        job = dataclasses.replace(job, handler=handler, framework=framework)
        self._jobs[name] = job
        self._job_added(job)

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
        self._job(name)
        del self._jobs[name]
        self._job_removed(name)

    def _job(self, name: str) -> Job:
        try:
            return self._jobs[name]
        except KeyError:
            raise JobNotFoundError(f"no job named {name!r}; registered: "
                                   f"{sorted(self._jobs) or 'none'}") from None

    def next_runs(self, name: str, count: int = 5, after: datetime | None = None
                  ) -> list[datetime]:
        """The next ``count`` slots of ``name`` after ``after`` (default now), as aware UTC
        datetimes. Pure: the public way to see the slot maths, DST included."""
        job = self._job(name)
        if after is None:
            start = int(self._clock_time() * 1000)
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

    def next_run(self, name: str) -> datetime | None:
        """The next slot of ``name`` as an aware UTC datetime, or ``None`` if none is left."""
        slots = self.next_runs(name, 1)
        return slots[0] if slots else None

    @property
    def job_names(self) -> list[str]:
        """Names of the jobs registered here."""
        return list(self._jobs)

    def _clock_time(self) -> float:
        clock = getattr(self, "clock", None)
        return clock.time() if clock is not None else datetime.now().timestamp()

    def _job_added(self, job: Job) -> None:
        """Hook: the engine starts scheduling a job added while it runs."""

    def _job_removed(self, name: str) -> None:
        """Hook: the engine stops scheduling a removed job."""


def _with_defaults(mark: Mark, defaults: Mapping[str, Any]) -> dict[str, Any]:
    options = dict(mark.options)
    for key, value in defaults.items():
        if key in options:
            if key == "data" and isinstance(value, dict) and isinstance(options[key], dict):
                options[key] = {**value, **options[key]}
        elif applies(key, mark.kind):
            options[key] = value
    return options
