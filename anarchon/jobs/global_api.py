"""Named schedulers and the module-level decorators ``anarchon.every/cron/at``.

A name is usable before it is configured: jobs registered on it wait until
``anarchon.configure(name, backend=...)`` creates its [`Scheduler`][anarchon.Scheduler].
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar, overload

from ..backends.base import Backend
from ..engine.sync_scheduler import Scheduler
from .definition import Handler, resolve_job
from .job_registry import make_decorator
from .name_checks import check_job_name
from .scheduler_table import lock as _lock
from .scheduler_table import pending as _pending
from .scheduler_table import registry_target as get_registry_target
from .scheduler_table import targets as _targets

if TYPE_CHECKING:
    from ..option_types import JobOptions, SchedulerOptionsDict, Unpack

DEFAULT = "default"
F = TypeVar("F", bound=Callable[..., Any])
#: the configured schedulers by name (their cores are ``scheduler_table.targets``)
_schedulers: dict[str, Scheduler] = {}


def configure(name: str = DEFAULT, *, backend: Backend | None = None, auto_start: bool = False,
              **options: Unpack[SchedulerOptionsDict]) -> Scheduler:
    """Create the named scheduler with ``backend`` and options, replaying jobs already
    registered on that name. With ``auto_start=True`` it starts at once."""
    with _lock:
        if name in _schedulers:
            raise ValueError(f"scheduler {name!r} is already configured")
        scheduler = Scheduler(backend, **options)
        pending = _pending.pop(name, None)
        try:
            for kind, job, when, handler, job_options in pending.jobs if pending else []:
                scheduler.declare_job(kind, job, when, handler, dict(job_options))
        except BaseException:
            if pending is not None:
                _pending[name] = pending
            raise
        _schedulers[name] = scheduler
        _targets[name] = scheduler.core
    if auto_start:
        scheduler.start()
    return scheduler


def get_scheduler(name: str = DEFAULT) -> Scheduler:
    """The configured scheduler called ``name``."""
    with _lock:
        try:
            return _schedulers[name]
        except KeyError:
            raise LookupError(f"scheduler {name!r} is not configured; call "
                              f"anarchon.configure({name!r}, backend=...)") from None


def _adder(scheduler: str) -> Callable[..., None]:
    def add(kind: str, name: str, when: Any, handler: Handler,
            options: Mapping[str, Any]) -> None:
        get_registry_target(scheduler).declare_job(kind, name, when, handler, options)

    return add


def _decorate(kind: str, name: str | None, when: Any, handler: Handler | None,
              scheduler: str | None, options: Mapping[str, Any]) -> Any:
    if name is not None:
        check_job_name(name)
    if when is None:
        raise TypeError(f"{kind}({name!r}) needs a schedule")
    if scheduler is not None and not isinstance(scheduler, str):
        raise TypeError(f"scheduler must be a scheduler name (str) or None, got {scheduler!r}")
    if handler is not None:
        if scheduler is None:
            raise TypeError("a handler needs a scheduler name to register on")
        _adder(scheduler)(kind, name or getattr(handler, "__name__", ""), when, handler, options)
        return get_registry_target(scheduler)
    resolve_job(kind, name or "<decorated>", when, options)
    return make_decorator(kind, name, when, options, scheduler,
                          _adder(scheduler) if scheduler is not None else None)


@overload
def every(name: str | None = None, interval: Any = None, handler: None = None, *,
          scheduler: str | None = DEFAULT, **options: Unpack[JobOptions]) -> Callable[[F], F]: ...


@overload
def every(name: str | None, interval: Any, handler: Handler, *,
          scheduler: str | None = DEFAULT, **options: Unpack[JobOptions]) -> Any: ...


def every(name: str | None = None, interval: Any = None, handler: Handler | None = None, *,
          scheduler: str | None = DEFAULT, **options: Unpack[JobOptions]) -> Any:
    """Module-level [`Scheduler.every()`][anarchon.Scheduler.every] on the named ``scheduler``.

    In a class body it marks the method: every instance registers the job when it is
    constructed (name ``ClassName-method`` unless given). ``scheduler=None`` only marks,
    for objects registered explicitly with ``scheduler.register(obj, prefix=...)``.

    The job name comes first, as in [`Scheduler.every()`][anarchon.Scheduler.every]; the Dramatiq
    marks
    (``anarchon_dramatiq.every()``) take the interval first and ``name=`` by keyword,
    because there the decorated actor names the job.
    """
    return _decorate("every", name, interval, handler, scheduler, options)


@overload
def cron(name: str | None = None, expr: Any = None, handler: None = None, *,
         scheduler: str | None = DEFAULT, **options: Unpack[JobOptions]) -> Callable[[F], F]: ...


@overload
def cron(name: str | None, expr: Any, handler: Handler, *,
         scheduler: str | None = DEFAULT, **options: Unpack[JobOptions]) -> Any: ...


def cron(name: str | None = None, expr: Any = None, handler: Handler | None = None, *,
         scheduler: str | None = DEFAULT, **options: Unpack[JobOptions]) -> Any:
    """Module-level [`Scheduler.cron()`][anarchon.Scheduler.cron] on the named ``scheduler``."""
    return _decorate("cron", name, expr, handler, scheduler, options)


@overload
def at(name: str | None = None, when: Any = None, handler: None = None, *,
       scheduler: str | None = DEFAULT, **options: Unpack[JobOptions]) -> Callable[[F], F]: ...


@overload
def at(name: str | None, when: Any, handler: Handler, *,
       scheduler: str | None = DEFAULT, **options: Unpack[JobOptions]) -> Any: ...


def at(name: str | None = None, when: Any = None, handler: Handler | None = None, *,
       scheduler: str | None = DEFAULT, **options: Unpack[JobOptions]) -> Any:
    """Module-level [`Scheduler.at()`][anarchon.Scheduler.at] on the named ``scheduler``."""
    return _decorate("at", name, when, handler, scheduler, options)


def start_all() -> None:
    """Start every configured scheduler that is not running yet."""
    with _lock:
        unconfigured = [name for name, pending in _pending.items() if pending.jobs]
        if unconfigured:
            raise TypeError(f"scheduler(s) {unconfigured} have jobs but no backend; call "
                            "anarchon.configure(name, backend=...) first")
        schedulers = list(_schedulers.values())
    for scheduler in schedulers:
        if not scheduler.core.runtime.tasks.started:
            scheduler.start()


def stop_all(timeout: float = 30) -> None:
    """Stop every configured scheduler gracefully and forget them."""
    with _lock:
        schedulers = list(_schedulers.values())
        _schedulers.clear()
        _targets.clear()
        _pending.clear()
    for scheduler in schedulers:
        scheduler.stop(timeout)
