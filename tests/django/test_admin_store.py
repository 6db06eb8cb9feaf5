"""Admin on the "django" store: errors as messages, one manual run at a time, expiring
requests, a link per attempt, gone jobs and ``forget``, database-side sorting and search,
the detail page's styling and wording."""

from __future__ import annotations

import io
import re

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client, override_settings

from anarchon_django.control import runtime
from anarchon_django.store.models import StoreAttempt, StoreJob, StoreTrigger
from anarchon_django.store.operations import Store
from anarchon_django.testing import run_job
from tests.django.support import wait_for

pytestmark = pytest.mark.django_db(transaction=True)

HISTORY = "/admin/anarchon_django/run/"
JOBS = "/admin/anarchon_django/job/"
RUN = "/admin/anarchon_django/job/run/"


@pytest.fixture
def admin() -> Client:
    client = Client()
    client.force_login(User.objects.create_superuser("root", "r@example.com", "pw"))
    return client


def messages_of(response: object) -> list[str]:
    return [str(m) for m in response.context["messages"]]  # type: ignore[attr-defined]


def test_a_store_that_does_not_answer_is_a_message_not_a_500(admin: Client) -> None:
    with override_settings(ANARCHON={"BACKEND": "redis://127.0.0.1:1/0"}):
        response = admin.post(RUN, {"job": "greet"}, follow=True)
    assert response.status_code == 200
    [text] = messages_of(response)
    assert "was not requested" in text and "greet" in text


def test_one_manual_run_at_a_time_per_job(admin: Client) -> None:
    first = admin.post(RUN, {"job": "greet"}, follow=True)
    assert "Requested a manual run" in messages_of(first)[0]
    assert "expires unclaimed after 60 s" in messages_of(first)[0]
    second = admin.post(RUN, {"job": "greet"}, follow=True)
    assert "was not requested again" in messages_of(second)[0]
    assert StoreTrigger.objects.filter(job="greet").count() == 1
    other = admin.post(RUN, {"job": "count-users"}, follow=True)  # another job is fine
    assert "Requested a manual run" in messages_of(other)[0]


def test_a_running_manual_attempt_also_blocks_a_request(admin: Client) -> None:
    store = Store("default")
    store.start_manual("greet", "elsewhere", store.now())
    response = admin.post(RUN, {"job": "greet"}, follow=True)
    assert "a manual run of it is running" in messages_of(response)[0]


def test_requests_expire_unclaimed() -> None:
    store = Store("default", trigger_ttl_ms=0)
    store.request_trigger("greet", None)
    requested = StoreTrigger.objects.get().requested_at
    wait_for(lambda: store.now() > requested, 5, "the database clock to move on")
    assert store.take_triggers(["greet"]) == []
    assert not StoreTrigger.objects.exists(), "the expired request was not dropped"
    assert store.manual_pending("greet") is None


def test_each_history_row_opens_its_own_attempt(admin: Client) -> None:
    # two manual attempts of one job with the same slot (a double click)
    for instance in ("first-box", "second-box"):
        StoreAttempt.objects.create(job="greet", slot=1_000, attempt=1, instance=instance,
                                    manual=True, reason="manual", status="success",
                                    started_at=1_000, finished_at=1_500)
    page = admin.get(HISTORY).content.decode()
    links = re.findall(r'href="(/admin/anarchon_django/run/detail/\?id=\d+)"', page)
    assert len(set(links)) == 2
    shown = {("first-box" in admin.get(link).content.decode()) for link in links}
    assert shown == {True, False}


def test_history_sorts_and_searches_error_text_in_the_database(admin: Client) -> None:
    run_job("greet")
    run_job("nightly-fail")
    def rows(page: str) -> list[str]:
        return re.findall(r'<tr class="anarchon-row" data-job="([^"]+)"', page)

    assert rows(admin.get(HISTORY, {"q": "report server"}).content.decode()) == [
        "nightly-fail"]
    assert rows(admin.get(HISTORY, {"o": "job"}).content.decode()) == [
        "greet", "nightly-fail"]
    descending = admin.get(HISTORY, {"o": "-job"}).content.decode()
    assert rows(descending) == ["nightly-fail", "greet"]
    assert 'class="sorted descending"' in descending
    assert sorted(rows(admin.get(HISTORY, {"q": "test"}).content.decode())) == [
        "greet", "nightly-fail"]  # the instance id run_job records


def test_gone_jobs_have_no_run_now_and_can_be_forgotten(admin: Client) -> None:
    StoreJob.objects.create(name="removed", kind="every", schedule="every 1h",
                            first_seen=0, updated=0)
    StoreAttempt.objects.create(job="removed", slot=0, attempt=1, instance="old",
                                manual=False, reason="scheduled", status="success",
                                started_at=0)
    page = admin.get(JOBS).content.decode()
    row = page[page.index('data-job="removed"'):]
    row = row[:row.index("</tr>")]
    assert "gone" in row and "Run now" not in row
    assert "Run now" in page  # the declared jobs keep theirs
    refused = admin.post(RUN, {"job": "removed"}, follow=True)
    assert "is gone" in messages_of(refused)[0] and not StoreTrigger.objects.exists()
    out = io.StringIO()
    call_command("anarchon", "forget", "removed", stdout=out)
    assert "2 row(s) removed" in out.getvalue()
    assert "removed" not in runtime.job_names()


def test_the_detail_page_is_styled_and_says_why_an_attempt_was_interrupted(
        admin: Client) -> None:
    row = StoreAttempt.objects.create(job="greet", slot=5, attempt=1, instance="a",
                                      manual=False, reason="scheduled", status="interrupted",
                                      started_at=5, finished_at=9)
    page = admin.get(f"/admin/anarchon_django/run/detail/?id={row.pk}").content.decode()
    assert "admin/css/forms.css" in page
    assert "None." not in page and "interrupted" in page and "renewing the lease" in page


def test_timeline_labels_have_tooltips_and_follow_the_theme(admin: Client) -> None:
    long_name = "a-really-long-job-name-for-the-timeline-row"
    StoreJob.objects.create(name=long_name, kind="every", schedule="every 1h",
                            first_seen=0, updated=Store("default").now())
    run_job("greet")
    page = admin.get(JOBS).content.decode()
    assert f"<title>{long_name}</title>" in page and long_name[:25] + "…" in page
    assert "background: #fff;" not in page and 'fill="#fafafa"' not in page
    assert re.search(r"\d\d:\d\d:\d\d UTC", page), "times need a zone label"
