"""Which Celery app the dynamic-jobs admin offers the tasks of.

The rule, in order:

1. ``ANARCHON["CELERY_APP"]`` is a dotted path (``"proj.celery:app"`` or
   ``"proj.celery.app"``): that app; one that cannot be imported is an error shown on
   the admin pages. ``False``: no Celery app (the plain dynamic-job form only).
2. Unset (``None``) and Celery importable: ``celery.current_app`` when it is an app the
   project created — the current app of this thread, else the default app
   (``app.set_default()``), else the one app in the process created with Celery's
   default ``set_as_current=True`` (what ``proj/celery.py`` makes and
   ``proj/__init__.py`` imports). Celery's implicit fallback app (``"default"``, made
   when nothing is current) never counts; two such apps and none current is an error
   asking for the setting.
3. Otherwise: none.
"""

from __future__ import annotations

from typing import Any

from django.utils.module_loading import import_string

from anarchon_django.settings.conf import get_settings


class CeleryAppError(ValueError):
    """The Celery app cannot be found as configured (the message says why)."""


def celery_app() -> Any | None:
    """The Celery app of the admin's Celery fields, or ``None``; raises
    [`CeleryAppError`][anarchon_django.admin.celery_app.CeleryAppError]."""
    setting = get_settings().celery_app
    if setting is False:
        return None
    if isinstance(setting, str):
        return _imported(setting)
    try:
        from celery import _state
    except ImportError:
        return None
    return _current(_state)


def _imported(path: str) -> Any:
    module, _, attr = path.strip().rpartition(":")
    dotted = f"{module}.{attr}" if module else path.strip()
    try:
        app = import_string(dotted)
    except ImportError as exc:
        raise CeleryAppError(f"ANARCHON['CELERY_APP'] {path!r} cannot be imported: {exc}") \
            from None
    if not _is_app(app):
        raise CeleryAppError(f"ANARCHON['CELERY_APP'] {path!r} is not a Celery app (got "
                             f"{type(app).__name__})")
    return app


def _is_app(value: Any) -> bool:
    try:
        from celery import Celery
    except ImportError:
        return False
    return isinstance(value, Celery)


def _current(state: Any) -> Any | None:
    # read celery._state directly: celery.current_app would create the fallback app, and
    # its current app is per thread (the request's thread is rarely the importing one).
    # Celery has no public reader of either (this thread's current app without the
    # fallback; the apps made in the process), so _tls and _get_active_apps() are read
    # here, and only here
    current = getattr(state._tls, "current_app", None)
    if current is not None and current.set_as_current:
        return current
    default = state.default_app
    if default is not None and default.set_as_current:
        return default
    apps = sorted((app for app in state._get_active_apps() if app.set_as_current),
                  key=lambda app: str(app.main))
    if len(apps) > 1:
        raise CeleryAppError(
            f"{len(apps)} Celery apps ({', '.join(repr(str(a.main)) for a in apps)}) and none "
            "is current: set ANARCHON['CELERY_APP'] to the one whose tasks the admin offers, "
            'e.g. "proj.celery:app"')
    return apps[0] if apps else None


def store_note(app: Any) -> str | None:
    """Why the app's beats may not see what the admin saves (another store), or ``None``."""
    from anarchon_celery.beat.config import DJANGO_SOURCE, ConfigurationError, resolve

    try:
        settings = resolve(app)
    except ConfigurationError as exc:
        return f"The Celery app's anarchon settings cannot be read: {exc}"
    ours = get_settings()
    if settings.source == DJANGO_SOURCE or (
            settings.backend == ours.backend and dict(settings.backend_options) == ours.options):
        return None
    return (f"The Celery app's beats use the store {settings.describe()}; entries saved here "
            "go to this site's store (ANARCHON['BACKEND']): the beats run them only when "
            "both are the same store.")


def task_names(app: Any) -> list[str]:
    """The app's registered tasks, without Celery's own (``celery.*``), sorted.

    The app's task modules are imported first (``app.loader.import_default_modules()``,
    as django-celery-beat does): in the standard layout (``app.autodiscover_tasks()`` in
    ``proj/celery.py``) the ``shared_task`` functions of ``myapp/tasks.py`` are registered only
    once a worker, or this call, imports them."""
    loader = getattr(app, "loader", None)
    if loader is not None:
        loader.import_default_modules()
    return sorted(name for name in app.tasks if not str(name).startswith("celery."))


__all__ = ["CeleryAppError", "celery_app", "store_note", "task_names"]
