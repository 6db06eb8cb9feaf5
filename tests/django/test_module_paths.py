"""The documented module paths of ``anarchon_django`` keep working after the move into
``settings/``, ``control/`` and ``admin/``: ``anarchon_django.conf``, ``.checks``,
``.backend`` and ``.runtime`` are deprecated aliases that *are* the new modules."""

from __future__ import annotations

import importlib

import pytest


@pytest.mark.parametrize(("old", "new"), [
    ("anarchon_django.conf", "anarchon_django.settings.conf"),
    ("anarchon_django.checks", "anarchon_django.settings.checks"),
    ("anarchon_django.backend", "anarchon_django.settings.backend"),
    ("anarchon_django.runtime", "anarchon_django.control.runtime"),
    ("anarchon.fencing", "anarchon.handoff.fence"),
])
def test_an_old_module_path_is_the_new_module(old: str, new: str) -> None:
    assert importlib.import_module(old) is importlib.import_module(new)


def test_the_documented_names_import_from_the_old_paths() -> None:
    from anarchon_django.backend import build_backend
    from anarchon_django.conf import AnarchonSettings, SettingsError, get_settings
    from anarchon_django.runtime import RunRefused, get_scheduler
    from anarchon_django.settings import backend, conf

    assert (AnarchonSettings, SettingsError, get_settings) == (
        conf.AnarchonSettings, conf.SettingsError, conf.get_settings)
    assert build_backend is backend.build_backend
    assert RunRefused is not None and callable(get_scheduler)


def test_the_admin_package_registers_the_pages() -> None:
    from django.contrib import admin

    from anarchon_django.models import Job, Run

    assert admin.site.is_registered(Run) and admin.site.is_registered(Job)
