"""Django: marked actors found where django_dramatiq finds them, on the project's store.

* ``register_project_actors()`` (called by ``anarchon_django`` when it schedules
  Dramatiq actors, e.g. in ``manage.py anarchon run``) imports every installed app's
  ``tasks`` module first — the modules django_dramatiq's workers load
  (``DRAMATIQ_AUTODISCOVER_MODULES``, default ``["tasks"]``) — so actors declared there
  are scheduled without extra settings.
* ``project_store()`` gives ``anarchon-dramatiq`` the project's anarchon store
  (``ANARCHON["BACKEND"]`` and its table) when run under Django without ``--backend``:
  one history for Celery, Dramatiq and plain jobs, which ``manage.py anarchon
  history``/``list`` and the admin show together.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from anarchon import Backend

from .sending import AnyScheduler, register_actors

logger = logging.getLogger("anarchon.dramatiq")

#: django_dramatiq's setting naming the modules its workers import from every app
MODULES_SETTING = "DRAMATIQ_AUTODISCOVER_MODULES"


def actor_modules() -> list[str]:
    """The module names django_dramatiq imports from every installed app."""
    from django.conf import settings

    modules = getattr(settings, MODULES_SETTING, None) or ["tasks"]
    return [str(m) for m in modules]


def discover_actors() -> None:
    """Import ``actor_modules()`` of every installed app (a missing one is skipped, a
    broken one raises, as Django's own autodiscovery does)."""
    from django.utils.module_loading import autodiscover_modules

    autodiscover_modules(*actor_modules())


def register_project_actors(scheduler: AnyScheduler, **options: Any) -> list[str]:
    """Discover the project's actors, register the marked ones on ``scheduler`` and say
    so when none is marked (``options`` as for ``register_actors()``)."""
    discover_actors()
    names = register_actors(scheduler, **options)
    if not names:
        logger.warning("scheduling Dramatiq actors, but no actor is marked with "
                       "anarchon_dramatiq.every/cron/at in the apps' %s modules (or the "
                       "modules of ANARCHON['AUTODISCOVER']); their actors are offered "
                       "for dynamic jobs only", ", ".join(actor_modules()))
    return names


def project_store() -> Backend | None:
    """The Django project's anarchon store, when ``DJANGO_SETTINGS_MODULE`` names a
    project with ``anarchon_django`` installed; else ``None``."""
    if not os.environ.get("DJANGO_SETTINGS_MODULE"):
        return None
    import django
    from django.apps import apps

    if not apps.ready:
        django.setup()
    if not apps.is_installed("anarchon_django"):
        return None
    from django.core.exceptions import ImproperlyConfigured

    from anarchon_django.settings.backend import build_backend
    from anarchon_django.settings.conf import get_settings

    try:
        return build_backend(get_settings())
    except ImproperlyConfigured as exc:
        raise ValueError(f"the project's ANARCHON store: {exc}") from exc
