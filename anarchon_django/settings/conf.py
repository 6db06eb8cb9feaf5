"""The ``ANARCHON`` setting: parsed once, re-read when ``override_settings`` changes it.

```python
ANARCHON = {
    "BACKEND": "django",        # or a URL (redis://, postgresql://, sqlite:///path, amqp://,
                                # nats:// ...), a dotted path to a Backend class, or a Backend
    "OPTIONS": {},              # backend keyword arguments (table, prefix, database, ...)
    "SCHEDULER": {},            # lease, heartbeat, jitter, max_late, timezone, instance_id ...
    "JOBS": {},                 # {"name": {"callable": "pkg.mod.func", "cron": "0 2 * * *", ...}}
    "AUTODISCOVER": ["jobs"],   # modules imported from every installed app
    "DRAMATIQ": None,           # schedule anarchon_dramatiq-marked actors (None: when
                                # django_dramatiq is in INSTALLED_APPS)
    "LISTENERS": {},            # {"failure": ["myapp.alerts.on_failure"], ...} per event
    "CELERY_APP": None,         # "proj.celery:app": the Celery app the dynamic-jobs admin
                                # offers tasks of (None: the current app; False: none)
    "METRICS": False,           # True: Prometheus metrics (docs/operations.md#metrics)
}
```
Every key is optional. ``SCHEDULER["timezone"]`` defaults to ``settings.TIME_ZONE``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings as django_settings
from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed
from django.dispatch import receiver

from anarchon.backends import Backend

SETTING = "ANARCHON"
KEYS = ("BACKEND", "OPTIONS", "SCHEDULER", "JOBS", "AUTODISCOVER", "DRAMATIQ", "LISTENERS",
        "CELERY_APP", "METRICS")
#: keys of a ``JOBS`` entry besides the job options
SCHEDULE_KEYS = ("every", "cron", "at")
#: scheduler arguments that are not options of the core (docs/contract.md, *Options*)
SCHEDULER_EXTRAS = ("instance_id",)


class SettingsError(ImproperlyConfigured):
    """A bad ``ANARCHON`` setting; ``check_id`` is the system check that reports it."""

    def __init__(self, message: str, check_id: str, hint: str | None = None) -> None:
        super().__init__(message if hint is None else f"{message} ({hint})")
        self.message = message
        self.check_id = check_id
        self.hint = hint


@dataclass(frozen=True)
class JobSetting:
    """One entry of ``ANARCHON["JOBS"]``: ``callable`` + one schedule key + job options."""

    name: str
    kind: str
    when: Any
    callable: str
    options: dict[str, Any]


@dataclass(frozen=True)
class AnarchonSettings:
    """The parsed ``ANARCHON`` setting."""

    backend: str | Backend = "django"
    options: dict[str, Any] = field(default_factory=dict)
    scheduler: dict[str, Any] = field(default_factory=dict)
    jobs: tuple[JobSetting, ...] = ()
    autodiscover: tuple[str, ...] = ("jobs",)
    #: schedule Dramatiq actors marked with anarchon_dramatiq (None: if django_dramatiq is
    #: installed)
    dramatiq: bool | None = None
    #: event type -> dotted paths of listeners (see ``anarchon_django.signals``)
    listeners: dict[str, tuple[str, ...]] = field(default_factory=dict)
    #: dotted path of the Celery app for the admin (None: the current app; False: none)
    celery_app: str | bool | None = None
    #: Prometheus metrics (``Scheduler(metrics=True)``; the ``prometheus`` extra)
    metrics: bool = False

    def scheduler_arguments(self) -> dict[str, Any]:
        """Keyword arguments for ``anarchon.Scheduler`` (timezone defaulted to TIME_ZONE)."""
        arguments = dict(self.scheduler)
        if "timezone" not in arguments:
            arguments["timezone"] = getattr(django_settings, "TIME_ZONE", None) or "UTC"
        return arguments


def parse(raw: object) -> AnarchonSettings:
    """Parse an ``ANARCHON`` value; raises
    [`SettingsError`][anarchon_django.settings.conf.SettingsError] on the first problem."""
    if raw is None:
        return AnarchonSettings()
    if not isinstance(raw, Mapping):
        raise SettingsError(f"{SETTING} must be a dict, got {type(raw).__name__}",
                            "anarchon.E001", 'e.g. ANARCHON = {"BACKEND": "django"}')
    unknown = sorted(str(key) for key in raw if key not in KEYS)
    if unknown:
        raise SettingsError(f"unknown {SETTING} key(s) {unknown}", "anarchon.E002",
                            f"known keys: {', '.join(KEYS)}")
    backend = raw.get("BACKEND", "django")
    if not isinstance(backend, (str, Backend)) or backend == "":
        raise SettingsError(f"{SETTING}['BACKEND'] must be 'django', a URL, a dotted path or "
                            f"a Backend, got {backend!r}", "anarchon.E003")
    options = _dict(raw, "OPTIONS")
    scheduler = _dict(raw, "SCHEDULER")
    jobs = _jobs(_dict(raw, "JOBS"))
    discover = raw.get("AUTODISCOVER", ["jobs"])
    if isinstance(discover, str) or not isinstance(discover, (list, tuple)) or not all(
            isinstance(module, str) and module for module in discover):
        raise SettingsError(f"{SETTING}['AUTODISCOVER'] must be a list of module names, got "
                            f"{discover!r}", "anarchon.E002", 'e.g. ["jobs"]; [] disables it')
    dramatiq = raw.get("DRAMATIQ")
    if dramatiq is not None and not isinstance(dramatiq, bool):
        raise SettingsError(f"{SETTING}['DRAMATIQ'] must be True, False or None, got "
                            f"{dramatiq!r}", "anarchon.E002",
                            "None (the default) schedules marked actors when django_dramatiq "
                            "is installed")
    celery_app = raw.get("CELERY_APP")
    if celery_app is not None and celery_app is not False and not (
            isinstance(celery_app, str) and celery_app.strip(". :")):
        raise SettingsError(f"{SETTING}['CELERY_APP'] must be a dotted path, False or None, "
                            f"got {celery_app!r}", "anarchon.E002",
                            'e.g. "proj.celery:app"; None uses celery.current_app')
    metrics = raw.get("METRICS", False)
    if not isinstance(metrics, bool):
        raise SettingsError(f"{SETTING}['METRICS'] must be True or False, got {metrics!r}",
                            "anarchon.E002", "True needs prometheus_client: "
                            "pip install 'anarchon[prometheus]'")
    return AnarchonSettings(backend, options, scheduler, jobs, tuple(discover), dramatiq,
                            _listeners(_dict(raw, "LISTENERS")), celery_app, metrics)


def _listeners(raw: Mapping[str, Any]) -> dict[str, tuple[str, ...]]:
    from anarchon.events import EVENT_TYPES

    parsed = {}
    for kind, paths in raw.items():
        where = f"{SETTING}['LISTENERS'][{kind!r}]"
        if kind not in EVENT_TYPES:
            raise SettingsError(f"{where}: unknown event", "anarchon.E002",
                                f"events: {', '.join(sorted(EVENT_TYPES))}")
        if isinstance(paths, str):
            paths = [paths]
        if not isinstance(paths, (list, tuple)) or not all(
                isinstance(path, str) and "." in path for path in paths):
            raise SettingsError(f"{where} must be a list of dotted paths, got {paths!r}",
                                "anarchon.E002", "e.g. ['myapp.alerts.on_failure']")
        parsed[kind] = tuple(paths)
    return parsed


def _dict(raw: Mapping[str, Any], key: str) -> dict[str, Any]:
    value = raw.get(key, {})
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise SettingsError(f"{SETTING}[{key!r}] must be a dict with str keys, got {value!r}",
                            "anarchon.E002")
    return dict(value)


def _jobs(raw: Mapping[str, Any]) -> tuple[JobSetting, ...]:
    jobs = []
    for name, entry in raw.items():
        where = f"{SETTING}['JOBS'][{name!r}]"
        if not isinstance(entry, Mapping):
            raise SettingsError(f"{where} must be a dict, got {entry!r}", "anarchon.E005")
        target = entry.get("callable")
        if not isinstance(target, str) or "." not in target:
            raise SettingsError(f"{where} needs 'callable': a dotted path to the handler",
                                "anarchon.E005", "e.g. 'reports.jobs.nightly'")
        kinds = [key for key in SCHEDULE_KEYS if key in entry]
        if len(kinds) != 1:
            raise SettingsError(f"{where} needs exactly one of 'every', 'cron', 'at'; got "
                                f"{kinds or 'none'}", "anarchon.E005")
        kind = kinds[0]
        options = {k: v for k, v in entry.items() if k not in ("callable", kind)}
        jobs.append(JobSetting(name, kind, entry[kind], target, options))
    return tuple(jobs)


_lock = threading.Lock()
_cached: AnarchonSettings | None = None
#: what else is built from the setting (registered by its owner, e.g. the runtime's
#: shared scheduler): reset with it, without this module importing its owners
_on_reset: list[Callable[[], None]] = []


def get_settings() -> AnarchonSettings:
    """The parsed setting (cached until ``setting_changed`` reports a change)."""
    global _cached
    with _lock:
        if _cached is None:
            _cached = parse(getattr(django_settings, SETTING, None))
        return _cached


def on_reset(callback: Callable[[], None]) -> Callable[[], None]:
    """Call ``callback`` whenever the setting is reset
    ([`reset()`][anarchon_django.settings.conf.reset], or
    ``setting_changed`` for ``ANARCHON``, ``DATABASES`` or ``TIME_ZONE``): the module
    holding state built from the setting registers its own reset here."""
    if callback not in _on_reset:
        _on_reset.append(callback)
    return callback


def reset() -> None:
    """Forget the parsed setting and everything registered with
    [`on_reset()`][anarchon_django.settings.conf.on_reset] (the
    schedulers built from it)."""
    global _cached
    with _lock:
        _cached = None
    for callback in list(_on_reset):
        callback()


@receiver(setting_changed)
def _setting_changed(*, setting: str, **kwargs: Any) -> None:
    if setting in (SETTING, "DATABASES", "TIME_ZONE"):
        reset()
