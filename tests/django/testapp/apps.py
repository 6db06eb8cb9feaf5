"""The test app whose ``jobs.py`` anarchon_django autodiscovers."""

from __future__ import annotations

from django.apps import AppConfig


class TestAppConfig(AppConfig):
    name = "tests.django.testapp"
    label = "anarchon_testapp"
