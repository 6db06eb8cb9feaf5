"""pytest-django setup for the anarchon_django tests.

The settings module is ``tests.django.settings`` (set here unless
``DJANGO_SETTINGS_MODULE`` is already set). The "django" store lives in the test
database, which pytest-django empties between tests, so histories never leak between
tests.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.django.settings")

import django
import pytest

django.setup()

from django.conf import settings  # noqa: E402
from django.test import override_settings  # noqa: E402

from anarchon_django.settings import conf  # noqa: E402
from tests.django.control_support import (  # noqa: E402, F401  (fixtures)
    control_store,
    core,
    staff,
    worker,
)


@pytest.fixture(autouse=True)
def _fresh_anarchon() -> Iterator[None]:
    conf.reset()
    yield
    conf.reset()


@pytest.fixture
def table() -> Iterator[str]:
    """A name of this test's own. The "django" store keeps its rows in the app's models
    on the test database, which pytest-django empties between tests; ``ANARCHON`` is this
    test's copy."""
    name = "t_" + uuid.uuid4().hex[:12]
    with override_settings(ANARCHON={**settings.ANARCHON}):
        yield name
