"""Fixtures of the runtime-control tests (admin, dynamic jobs, commands).

``control_store`` runs each test on a backend with runtime control: the core's SQLite
store (a file of the test's own) and the ``"django"`` ORM store (the test database, which
pytest-django empties between tests). The core API on a scheduler of its own checks what
the pages and commands did.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import Permission, User
from django.test import Client, override_settings

from anarchon import RunContext, Scheduler
from anarchon_django.control import runtime

#: the backends the runtime-control tests run on
BACKENDS = ("sqlite", "django")


@pytest.fixture(params=BACKENDS)
def control_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The backend of this test, configured in ``ANARCHON``; its kind."""
    if request.param == "sqlite":
        options: dict[str, Any] = {"BACKEND": f"sqlite:///{tmp_path}/control.db"}
    else:
        options = {"BACKEND": "django"}
    with override_settings(ANARCHON={**settings.ANARCHON, **options}):
        yield request.param


@pytest.fixture
def core(control_store: str) -> Iterator[Scheduler]:
    """A scheduler of the test's own on the same store (never started): the checks."""
    scheduler = runtime.build_scheduler(instance_id="checker")
    try:
        yield scheduler
    finally:
        scheduler.close()


def report(ctx: RunContext) -> None:
    """The handler dynamic jobs run in these tests."""
    REPORTS.append({"job": ctx.name, "params": ctx.params})


REPORTS: list[dict[str, object]] = []


@pytest.fixture
def worker(control_store: str) -> Iterator[Scheduler]:
    """A running instance offering the handler ``report``."""
    scheduler = runtime.build_scheduler(instance_id="worker-1")
    scheduler.handler("report", report)
    scheduler.start()
    try:
        yield scheduler
    finally:
        scheduler.stop(5)


def make_user(name: str, *perms: str) -> User:
    user: User = User.objects.create_user(name, password="pw", is_staff=True)
    for codename in perms:
        user.user_permissions.add(Permission.objects.get(
            content_type__app_label="anarchon_django", codename=codename))
    return user


@pytest.fixture
def staff() -> Callable[..., Client]:
    """A client logged in as a new staff user with ``perms`` (``name=`` to choose it)."""
    def make(*perms: str, name: str | None = None, enforce_csrf: bool = False) -> Client:
        client = Client(enforce_csrf_checks=enforce_csrf)
        client.force_login(make_user(name or f"u{User.objects.count()}", *perms))
        return client

    return make


def messages_of(response: object) -> list[str]:
    return [str(m) for m in response.context["messages"]]  # type: ignore[attr-defined]
