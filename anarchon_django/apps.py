"""The Django app: checks, settings signals and job autodiscovery in ``ready()``."""

from __future__ import annotations

from django.apps import AppConfig


class AnarchonConfig(AppConfig):
    """``INSTALLED_APPS += ["anarchon_django"]``."""

    name = "anarchon_django"
    label = "anarchon_django"
    verbose_name = "Anarchon"
    default_auto_field = "django.db.models.AutoField"

    def ready(self) -> None:
        # registers checks and the settings receiver
        from anarchon_django.settings import checks, conf  # noqa: F401

        autodiscover()


def autodiscover() -> None:
    """Import ``ANARCHON["AUTODISCOVER"]`` modules (default ``jobs``) of every installed app.

    A missing module is skipped; an error inside one (an ``ImportError`` included)
    propagates, as with ``admin.py`` autodiscovery.
    """
    from django.utils.module_loading import autodiscover_modules

    from anarchon_django.settings.conf import SettingsError, get_settings

    try:
        modules = get_settings().autodiscover
    except SettingsError:
        return  # reported by the system checks (anarchon.E00x)
    if modules:
        autodiscover_modules(*modules)
