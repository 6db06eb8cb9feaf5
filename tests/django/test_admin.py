"""Admin pages: permissions matrix, CSRF, read-only history, filters, detail, Run now."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client
from django.urls import reverse

from anarchon_django.control import runtime
from tests.django.support import wait_for
from tests.django.testapp import jobs

pytestmark = pytest.mark.django_db(transaction=True)

HISTORY = "/admin/anarchon_django/run/"
DETAIL = "/admin/anarchon_django/run/detail/"
JOBS = "/admin/anarchon_django/job/"
RUN = "/admin/anarchon_django/job/run/"


def make_user(name: str, *perms: str, staff: bool = True) -> User:
    user: User = User.objects.create_user(name, password="pw", is_staff=staff)
    for codename in perms:
        user.user_permissions.add(Permission.objects.get(
            content_type__app_label="anarchon_django", codename=codename))
    return user


@pytest.fixture
def login() -> Callable[..., Client]:
    def make(*perms: str, enforce_csrf: bool = False) -> Client:
        client = Client(enforce_csrf_checks=enforce_csrf)
        client.force_login(make_user(f"u{len(perms)}{User.objects.count()}", *perms))
        return client

    return make


@pytest.fixture
def seeded(table: str) -> None:
    scheduler = runtime.build_scheduler(instance_id="seed-1")
    scheduler.run_now("greet")
    scheduler.run_now("nightly-fail")
    scheduler.close()


def test_urls_are_named() -> None:
    assert reverse("admin:anarchon_django_run_changelist") == HISTORY
    assert reverse("admin:anarchon_django_run_detail") == DETAIL
    assert reverse("admin:anarchon_django_job_changelist") == JOBS
    assert reverse("admin:anarchon_django_job_run") == RUN


@pytest.mark.parametrize("url", [HISTORY, JOBS, DETAIL + "?job=greet&slot=1&attempt=1"])
def test_anonymous_is_sent_to_login(url: str) -> None:
    response = Client().get(url)
    assert response.status_code == 302 and "/admin/login/" in response["Location"]


def test_anonymous_post_run_is_sent_to_login() -> None:
    response = Client().post(RUN, {"job": "greet"})
    assert response.status_code == 302 and "/admin/login/" in response["Location"]


@pytest.mark.parametrize("url", [HISTORY, JOBS, DETAIL + "?job=greet&slot=1&attempt=1"])
def test_staff_without_permission_gets_403(login: Callable[..., Client], url: str) -> None:
    assert login().get(url).status_code == 403


def test_staff_without_permission_cannot_run(login: Callable[..., Client], table: str) -> None:
    assert login().post(RUN, {"job": "greet"}).status_code == 403


def test_viewer_sees_history_and_jobs_but_cannot_run(login: Callable[..., Client],
                                                     seeded: None) -> None:
    client = login("view_run", "view_job")
    history = client.get(HISTORY)
    assert history.status_code == 200
    assert b"nightly-fail" in history.content and b"greet" in history.content
    page = client.get(JOBS)
    assert page.status_code == 200 and b"Run now" not in page.content
    assert b'class="anarchon-timeline"' in page.content and b"seed-1" in page.content
    assert b'class="run run-failure"' in page.content
    assert client.post(RUN, {"job": "greet"}).status_code == 403


def test_viewer_of_history_only_cannot_open_jobs(login: Callable[..., Client]) -> None:
    client = login("view_run")
    assert client.get(HISTORY).status_code == 200
    assert client.get(JOBS).status_code == 403


def test_runner_requests_a_run_through_the_store(login: Callable[..., Client],
                                                 table: str) -> None:
    client = login("view_run", "view_job", "run_job")
    page = client.get(JOBS)
    assert page.content.count(b'value="Run now"') == 3
    before = len(jobs.CALLS)
    response = client.post(RUN, {"job": "greet"}, follow=True)
    assert response.redirect_chain == [(JOBS, 302)]
    assert "Requested a manual run" in response.content.decode()
    assert len(jobs.CALLS) == before, "Run now must never run the job in the request"
    scheduler = runtime.build_scheduler(["greet"], instance_id="worker-9")
    scheduler.start()
    try:
        wait_for(lambda: [r for r in scheduler.history("greet", 5)
                          if r.manual and r.instance_id == "worker-9"], 10, "the manual run")
    finally:
        scheduler.stop()
    assert len(jobs.CALLS) == before + 1


def test_run_now_is_post_only(login: Callable[..., Client], table: str) -> None:
    assert login("view_job", "run_job").get(RUN + "?job=greet").status_code == 405


def test_run_now_unknown_job_shows_an_error(login: Callable[..., Client], table: str) -> None:
    response = login("view_job", "run_job").post(RUN, {"job": "nope"}, follow=True)
    assert "unknown job" in response.content.decode().lower()


def test_run_now_needs_a_csrf_token(login: Callable[..., Client], table: str) -> None:
    client = login("view_run", "view_job", "run_job", enforce_csrf=True)
    assert client.post(RUN, {"job": "greet"}).status_code == 403
    page = client.get(JOBS).content.decode()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page)
    assert token is not None
    response = client.post(RUN, {"job": "greet", "csrfmiddlewaretoken": token.group(1)})
    assert response.status_code == 302


def test_no_add_change_or_delete(login: Callable[..., Client]) -> None:
    client = login("view_run", "view_job", "run_job")
    for url in (HISTORY + "add/", HISTORY + "1/change/", HISTORY + "1/delete/", JOBS + "add/"):
        assert client.get(url).status_code == 404
    index = client.get("/admin/").content.decode()
    assert "Anarchon" in index and HISTORY in index and JOBS in index
    assert HISTORY + "add/" not in index


def test_filters_and_search(login: Callable[..., Client], seeded: None) -> None:
    client = login("view_run")
    failures = client.get(HISTORY, {"status": "failure"}).content.decode()
    assert 'data-status="failure"' in failures and 'data-job="greet"' not in failures
    greet = client.get(HISTORY, {"job": "greet"}).content.decode()
    assert 'data-job="greet"' in greet and 'data-job="nightly-fail"' not in greet
    assert 'data-job="greet"' in client.get(HISTORY, {"q": "GRE"}).content.decode()
    assert "No runs match" in client.get(HISTORY, {"instance": "elsewhere"}).content.decode()
    assert 'data-job="greet"' in client.get(HISTORY, {"date": "today"}).content.decode()
    assert "No runs match" in client.get(HISTORY, {"date": "2001-01-01"}).content.decode()
    assert 'data-reason="manual"' in client.get(HISTORY, {"reason": "manual"}).content.decode()
    assert "seed-1" in client.get(HISTORY).content.decode()


def test_detail_shows_the_error(login: Callable[..., Client], seeded: None) -> None:
    client = login("view_run")
    page = client.get(HISTORY, {"status": "failure"}).content.decode()
    link = re.search(r'href="(/admin/anarchon_django/run/detail/\?[^"]+)"', page)
    assert link is not None
    detail = client.get(link.group(1).replace("&amp;", "&"))
    assert detail.status_code == 200
    assert "RuntimeError: the report server said no" in detail.content.decode()
    assert client.get(DETAIL, {"job": "greet", "slot": "1", "attempt": "1"}).status_code == 404
    assert client.get(DETAIL, {"job": "greet"}).status_code == 404


def test_pages_work_on_another_backend(login: Callable[..., Client], tmp_path: object) -> None:
    from django.conf import settings
    from django.test import override_settings

    url = f"sqlite:///{tmp_path}/other.db"
    with override_settings(ANARCHON={**settings.ANARCHON, "BACKEND": url}):
        scheduler = runtime.build_scheduler(instance_id="other-1")
        scheduler.run_now("greet")
        scheduler.close()
        client = login("view_run", "view_job")
        assert "other-1" in client.get(HISTORY).content.decode()
        assert "other-1" in client.get(JOBS).content.decode()


def test_store_errors_are_shown_not_raised(login: Callable[..., Client]) -> None:
    from django.conf import settings
    from django.test import override_settings

    with override_settings(ANARCHON={**settings.ANARCHON,
                                      "BACKEND": "sqlite:////nonexistent/dir/x.db"}):
        client = login("view_run", "view_job")
        assert "did not answer" in client.get(HISTORY).content.decode()
        assert "did not answer" in client.get(JOBS).content.decode()
