"""The Jobs admin's runtime control: Pause, Resume, Edit schedule and reset, the job page
(paused, source, changes), the ``change_job`` permission and CSRF. Each change is checked
through the core API on a scheduler of the test's own."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable

import pytest
from django.test import Client

from anarchon import Scheduler
from tests.django.control_support import messages_of

pytestmark = pytest.mark.django_db(transaction=True)

JOBS = "/admin/anarchon_django/job/"
DETAIL = "/admin/anarchon_django/job/detail/"
PAUSE = "/admin/anarchon_django/job/pause/"
RESUME = "/admin/anarchon_django/job/resume/"

Staff = Callable[..., Client]


def info(core: Scheduler, name: str) -> object:
    return next(job for job in core.jobs() if job.name == name)


def test_pause_and_resume_change_the_store_and_the_change_log(
        staff: Staff, core: Scheduler) -> None:
    client = staff("view_job", "change_job", name="ops")
    page = client.get(JOBS).content.decode()
    assert 'value="Pause" data-job="greet"' in page
    response = client.post(PAUSE, {"job": "greet", "next": JOBS}, follow=True)
    assert response.redirect_chain == [(JOBS, 302)]
    [message] = messages_of(response)
    assert message.startswith("Paused “greet” (version 1)")
    assert info(core, "greet").paused  # type: ignore[attr-defined]
    [change] = core.changes("greet")
    assert (change.action, change.by) == ("pause", "django:ops")
    page = response.content.decode()
    assert 'data-job="greet" data-paused="1"' in page and 'value="Resume" data-job="greet"' in page

    response = client.post(RESUME, {"job": "greet"}, follow=True)
    assert "Resumed “greet” (version 2)" in messages_of(response)[0]
    assert not info(core, "greet").paused  # type: ignore[attr-defined]
    assert [c.action for c in core.changes("greet")] == ["resume", "pause"]


def test_reschedule_and_reset_through_the_job_page(staff: Staff, core: Scheduler) -> None:
    client = staff("view_job", "change_job", name="sched")
    page = client.get(DETAIL, {"job": "greet"}).content.decode()
    assert 'data-source="code"' in page and "Edit schedule" in page
    assert 'name="every" value="1h"' in page  # the form starts from the current schedule
    response = client.post(DETAIL + "?job=greet", {"kind": "every", "every": "5m",
                                                   "offset": "10s"}, follow=True)
    assert "Rescheduled “greet” to every 300s +10s" in messages_of(response)[0]
    greet = info(core, "greet")
    assert (greet.schedule, greet.source) == ("every 300s +10s", "override")  # type: ignore[attr-defined]
    page = response.content.decode()
    assert 'data-source="override"' in page and "django:sched" in page
    assert 'data-action="reschedule"' in page

    response = client.post(DETAIL + "?job=nightly-fail",
                           {"kind": "cron", "cron": "30 4 * * 1", "timezone": "Asia/Tokyo"},
                           follow=True)
    assert "cron 30 4 * * 1 (Asia/Tokyo)" in messages_of(response)[0]
    assert info(core, "nightly-fail").schedule == "cron 30 4 * * 1 (Asia/Tokyo)"  # type: ignore[attr-defined]

    response = client.post(DETAIL + "?job=greet", {"kind": "reset"}, follow=True)
    assert "Reset “greet” to the schedule in its code" in messages_of(response)[0]
    greet = info(core, "greet")
    assert (greet.schedule, greet.source) == ("every 1h", "code")  # type: ignore[attr-defined]
    assert [c.action for c in core.changes("greet")] == ["reset", "reschedule"]
    assert all(c.by == "django:sched" for c in core.changes("greet"))


def test_a_bad_cron_or_interval_is_a_form_error_and_changes_nothing(
        staff: Staff, core: Scheduler) -> None:
    client = staff("view_job", "change_job")
    response = client.post(DETAIL + "?job=greet", {"kind": "cron", "cron": "61 * * * *"})
    assert response.status_code == 200
    errors = response.context["form"].errors
    assert "cron" in errors and "61" in errors["cron"][0], errors
    response = client.post(DETAIL + "?job=greet", {"kind": "cron", "cron": "0 3 * * *",
                                                   "timezone": "Mars/Olympus"})
    assert "timezone" in response.context["form"].errors
    response = client.post(DETAIL + "?job=greet", {"kind": "every", "every": "soon"})
    assert "every" in response.context["form"].errors
    response = client.post(DETAIL + "?job=greet", {"kind": "every"})
    assert response.context["form"].errors["every"] == ["Give the interval, e.g. 5m."]
    assert info(core, "greet").source == "code"  # type: ignore[attr-defined]
    assert core.changes("greet") == []


def test_without_change_job_a_post_is_403_and_nothing_changes(
        staff: Staff, core: Scheduler) -> None:
    client = staff("view_job", "run_job")
    page = client.get(JOBS).content.decode()
    assert 'value="Pause"' not in page and 'value="Run now"' in page
    detail = client.get(DETAIL, {"job": "greet"}).content.decode()
    assert "Edit schedule" not in detail and 'data-source="code"' in detail
    assert client.post(PAUSE, {"job": "greet"}).status_code == 403
    assert client.post(RESUME, {"job": "greet"}).status_code == 403
    assert client.post(DETAIL + "?job=greet", {"kind": "every", "every": "5m"}
                       ).status_code == 403
    assert staff().get(DETAIL, {"job": "greet"}).status_code == 403  # no view_job
    greet = info(core, "greet")
    assert not greet.paused and greet.source == "code"  # type: ignore[attr-defined]
    assert core.changes("greet") == []


def test_pause_needs_a_csrf_token(staff: Staff, core: Scheduler) -> None:
    client = staff("view_job", "change_job", enforce_csrf=True)
    assert client.post(PAUSE, {"job": "greet"}).status_code == 403
    assert client.post(DETAIL + "?job=greet", {"kind": "every", "every": "5m"}
                       ).status_code == 403
    assert not info(core, "greet").paused  # type: ignore[attr-defined]
    page = client.get(JOBS).content.decode()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page)
    assert token is not None
    response = client.post(PAUSE, {"job": "greet", "csrfmiddlewaretoken": token.group(1)})
    assert response.status_code == 302
    assert info(core, "greet").paused  # type: ignore[attr-defined]


def test_pause_and_resume_are_post_only(staff: Staff, control_store: str) -> None:
    client = staff("view_job", "change_job")
    assert client.get(PAUSE + "?job=greet").status_code == 405
    assert client.get(RESUME + "?job=greet").status_code == 405


def test_unknown_job_and_foreign_next_are_handled(staff: Staff, core: Scheduler) -> None:
    client = staff("view_job", "change_job")
    response = client.post(PAUSE, {"job": "nope", "next": "https://evil.example/"},
                           follow=True)
    assert response.redirect_chain == [(JOBS, 302)]
    assert "no job named 'nope'" in messages_of(response)[0]
    assert client.get(DETAIL, {"job": "nope"}).status_code == 404


def test_the_job_page_lists_changes_newest_first(staff: Staff, core: Scheduler) -> None:
    core.pause("count-users", by="ops-script")
    core.reschedule("count-users", every="2h", by="ops-script")
    page = staff("view_job").get(DETAIL, {"job": "count-users"}).content.decode()
    assert 'data-paused="1"' in page and 'data-source="override"' in page
    actions = re.findall(r'class="anarchon-change" data-action="(\w+)"', page)
    assert actions == ["reschedule", "pause"]
    assert "ops-script" in page and "every 7200s" in page


def test_a_claim_only_backend_says_runtime_control_is_unavailable(staff: Staff) -> None:
    from django.conf import settings
    from django.test import override_settings

    from tests.stores import nats

    url = nats.url_for("djc" + uuid.uuid4().hex[:8])
    with override_settings(ANARCHON={**settings.ANARCHON, "BACKEND": url, "SCHEDULER": {}}):
        client = staff("view_job", "change_job")
        assert 'value="Pause"' not in client.get(JOBS).content.decode()
        page = client.get(DETAIL, {"job": "greet"}).content.decode()
        assert "Runtime control is not available" in page, re.findall(r"errornote.*", page)
        assert "Edit schedule" not in page
        response = client.post(PAUSE, {"job": "greet"}, follow=True)
        assert "does not support runtime control" in messages_of(response)[0]


def test_a_dynamic_job_is_rescheduled_but_not_reset(staff: Staff, core: Scheduler) -> None:
    core.add_job("digest", handler="report", every="1h")
    client = staff("view_job", "change_job")
    page = client.get(DETAIL, {"job": "digest"}).content.decode()
    assert 'data-source="dynamic"' in page and 'value="reset"' not in page
    response = client.post(DETAIL + "?job=digest", {"kind": "every", "every": "2h"},
                           follow=True)
    assert "Rescheduled “digest” to every 7200s" in messages_of(response)[0]
    job = info(core, "digest")
    assert job.schedule == "every 7200s" and job.source == "dynamic"  # type: ignore[attr-defined]
