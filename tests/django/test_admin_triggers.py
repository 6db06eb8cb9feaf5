"""Run now on the core stores: the same rules as on the "django" store (one manual run at
a time per job, expiring requests), refusals shown as messages, never a 500."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client, override_settings

import anarchon
from anarchon.backends.base import JobSpec
from anarchon.backends.capabilities import TriggerStore
from anarchon.backends.sqlite import SqliteBackend
from anarchon.clock import OffsetClock
from anarchon_django.control import runtime
from tests.conftest import _require
from tests.stores import StoreSpec, all_stores

pytestmark = pytest.mark.django_db(transaction=True)

RUN = "/admin/anarchon_django/job/run/"
CORE_STORES = [s for s in all_stores() if s.id in ("sqlite", "postgres", "redis")]


@pytest.fixture(params=CORE_STORES, ids=lambda s: s.id)
def core_url(request: pytest.FixtureRequest) -> str:
    spec: StoreSpec = request.param
    _require(spec)
    return spec.url_for("ns_" + uuid.uuid4().hex[:12])


def messages_of(response: object) -> list[str]:
    return [str(m) for m in response.context["messages"]]  # type: ignore[attr-defined]


def test_run_now_on_a_core_store_refuses_a_second_request_as_a_message(
        core_url: str) -> None:
    admin = Client()
    admin.force_login(User.objects.create_superuser("root", "r@example.com", "pw"))
    with override_settings(ANARCHON={**settings.ANARCHON, "BACKEND": core_url}):
        first = admin.post(RUN, {"job": "greet"}, follow=True)
        assert first.status_code == 200
        [text] = messages_of(first)
        assert "Requested a manual run" in text and "expires unclaimed after 60 s" in text
        second = admin.post(RUN, {"job": "greet"}, follow=True)
        assert second.status_code == 200
        [refused] = messages_of(second)
        assert "was not requested again" in refused and "no instance has taken it" in refused
        backend = runtime.get_scheduler().backend
        assert isinstance(backend, TriggerStore)
        assert backend.name != "django" and backend.trigger_ttl == 60.0


def test_run_now_says_when_an_instance_last_registered_the_job(core_url: str) -> None:
    admin = Client()
    admin.force_login(User.objects.create_superuser("root", "r@example.com", "pw"))
    backend = anarchon.from_url(core_url)

    async def register() -> None:
        await backend.open()
        await backend.register([JobSpec("greet", "every", "every 1h")])
        await backend.close()

    asyncio.run(register())  # as a running instance does at start and every 10 min
    with override_settings(ANARCHON={**settings.ANARCHON, "BACKEND": core_url}):
        response = admin.post(RUN, {"job": "greet"}, follow=True)
    [text] = messages_of(response)
    assert "an instance registered 'greet'" in text and " s ago " in text, text
    assert "every 10 min" in text and "expires unclaimed after 60 s" in text


def test_a_job_nobody_registered_for_a_day_is_gone_on_a_core_store(tmp_path: Path) -> None:
    """The Jobs page marks it gone without Run now, and Run now is refused."""
    url = f"sqlite:///{tmp_path / 'store.db'}"
    old = SqliteBackend(str(tmp_path / "store.db"), clock=OffsetClock(-25 * 3600.0))

    async def register() -> None:
        await old.open()
        await old.register([JobSpec("retired", "every", "every 1h")])
        await old.close()

    asyncio.run(register())
    admin = Client()
    admin.force_login(User.objects.create_superuser("root", "r@example.com", "pw"))
    with override_settings(ANARCHON={**settings.ANARCHON, "BACKEND": url}):
        page = admin.get("/admin/anarchon_django/job/").content.decode()
        refused = admin.post(RUN, {"job": "retired"}, follow=True)
    row = page[page.index('title="retired"'):]
    row = row[:row.index("</tr>")]
    assert 'class="anarchon-gone"' in row and 'value="Run now"' not in row
    [message] = messages_of(refused)
    assert "“retired” is gone" in message and "anarchon forget retired" in message
