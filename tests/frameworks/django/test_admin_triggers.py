"""Run now on the core stores: the same rules as on the "django" store (one manual run at
a time per job, expiring requests), refusals shown as messages, never a 500."""

from __future__ import annotations

import uuid

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client, override_settings

from anarchon_django import runtime
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
        assert backend.name != "django" and backend.trigger_ttl == 60.0
