"""The dynamic jobs' admin: list, add, edit, delete through ``add_job(replace=True)`` /
``pause`` / ``remove_job``; handler choices from live instances; the core's errors on the
form; permissions and CSRF. A running instance runs a job added here without a restart."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from django.test import Client

from anarchon import JobInfo, Scheduler
from tests.django import control_support
from tests.django.control_support import messages_of
from tests.django.support import wait_for

pytestmark = pytest.mark.django_db(transaction=True)

LIST = "/admin/anarchon_django/dynamicjob/"
ADD = LIST + "add/"
CHANGE = LIST + "change/"
DELETE = LIST + "delete/"
ALL = ("view_dynamicjob", "add_dynamicjob", "change_dynamicjob", "delete_dynamicjob")

Staff = Callable[..., Client]


def form(**fields: Any) -> dict[str, Any]:
    base = {"name": "nightly-report", "handler": "report", "kind": "every", "every": "1h",
            "params": '{"to": "ops@example.com"}', "enabled": "on"}
    base.update(fields)
    return {k: v for k, v in base.items() if v is not None}


def dynamic(core: Scheduler, name: str) -> JobInfo | None:
    return next((job for job in core.jobs() if job.name == name and job.source == "dynamic"),
                None)


def offered(core: Scheduler) -> bool:
    return "report" in {n for names in core.offered_handlers().values() for n in names}


def test_add_edit_and_delete_a_dynamic_job(staff: Staff, core: Scheduler,
                                           worker: Scheduler) -> None:
    wait_for(lambda: offered(core), 10, "the worker's handler offer")
    client = staff(*ALL, name="dyn")
    page = client.get(ADD).content.decode()
    assert '<select name="handler"' in page and '<option value="report">' in page
    response = client.post(ADD, form(max_attempts="3", jitter="2s", overlap="allow"),
                           follow=True)
    assert response.redirect_chain == [(LIST, 302)], response.content.decode()[:2000]
    assert messages_of(response)[0].startswith("Added dynamic job “nightly-report” (report, "
                                               "every 3600s)")
    job = dynamic(core, "nightly-report")
    assert job is not None and job.handler == "report" and not job.paused
    assert job.params == {"to": "ops@example.com"} and job.schedule == "every 3600s"
    assert job.options == {"max_attempts": 3, "jitter": "2s", "overlap": "allow"}
    listed = response.content.decode()
    assert 'data-job="nightly-report" data-paused="0"' in listed and "worker-1" in listed

    edit = client.get(CHANGE, {"job": "nightly-report"}).content.decode()
    assert 'name="every" value="3600s"' in edit
    assert re.search(r'name="params"[^>]*>\s*\{&quot;to&quot;: &quot;ops@example.com&quot;\}'
                     r'</textarea>', edit), edit
    assert re.search(r'name="name"[^>]*disabled', edit)
    response = client.post(CHANGE + "?job=nightly-report",
                           form(kind="cron", every=None, cron="0 6 * * *",
                                timezone="Europe/Berlin", params='{"to": "dev@example.com"}',
                                enabled=None), follow=True)
    assert "Updated dynamic job “nightly-report”" in messages_of(response)[0]
    assert "it is paused" in messages_of(response)[0]
    job = dynamic(core, "nightly-report")
    assert job is not None and job.paused and job.schedule == "cron 0 6 * * * (Europe/Berlin)"
    assert job.params == {"to": "dev@example.com"}
    assert [(c.action, c.by) for c in core.changes("nightly-report")] == [
        ("update", "django:dyn"), ("add", "django:dyn")]

    response = client.post(CHANGE + "?job=nightly-report",
                           form(kind="cron", every=None, cron="0 6 * * *"), follow=True)
    job = dynamic(core, "nightly-report")
    assert job is not None and not job.paused and job.schedule == "cron 0 6 * * * (UTC)"
    assert core.changes("nightly-report")[0].action == "resume"

    assert "Remove the dynamic job" in client.get(DELETE, {"job": "nightly-report"}
                                                  ).content.decode()
    response = client.post(DELETE + "?job=nightly-report", follow=True)
    assert "Removed dynamic job “nightly-report”" in messages_of(response)[0]
    assert dynamic(core, "nightly-report") is None
    assert core.changes("nightly-report")[0].action == "remove"


def test_a_job_added_here_runs_on_a_live_instance(staff: Staff, core: Scheduler,
                                                  worker: Scheduler) -> None:
    wait_for(lambda: offered(core), 10, "the worker's handler offer")
    before = len(control_support.REPORTS)
    response = staff(*ALL).post(ADD, form(name="every-second", every="1s",
                                          params='{"n": 1}'))
    assert response.status_code == 302
    wait_for(lambda: [r for r in control_support.REPORTS[before:]
                      if r["job"] == "every-second"], 15, "a run of the added job")
    assert control_support.REPORTS[-1]["params"] == {"n": 1}


def test_at_date_time_and_handler_typed_when_none_is_live(staff: Staff,
                                                          core: Scheduler) -> None:
    client = staff(*ALL)
    page = client.get(ADD).content.decode()
    assert '<input type="text" name="handler"' in page and "type the handler" in page
    assert re.search(r'name="params"[^>]*>\s*</textarea>', page), "empty params, not null"
    response = client.post(ADD, form(name="once", kind="at", every=None,
                                     at="2099-01-02 03:04:05", handler="later"))
    assert response.status_code == 302, response.context["form"].errors
    job = dynamic(core, "once")
    assert job is not None and job.kind == "at" and job.handler == "later"
    assert job.schedule.startswith("at 2099-01-02T03:04:05")
    assert job.runnable_by == ()
    listed = client.get(LIST).content.decode()
    assert "no running instance" in listed


@pytest.mark.parametrize(("fields", "field", "text"), [
    ({"kind": "cron", "every": None, "cron": "0 25 * * *"}, "cron", "25"),
    ({"params": "{not json"}, "params", "Enter a valid JSON"),
    ({"params": "NaN"}, "params", "JSON"),
    ({"every": "soon"}, "every", "soon"),
    ({"kind": "cron", "every": None, "cron": "0 3 * * *", "timezone": "Nowhere/City"},
     "timezone", "Nowhere/City"),
    ({"overlap": "allow", "kind": "at", "every": None, "at": "2099-01-01 00:00"},
     "overlap", "overlap"),
    ({"max_late": "-5"}, "max_late", "max_late"),
    ({"name": "greet"}, "name", "declared in code"),
])
def test_bad_input_shows_the_core_error_on_the_form(
        staff: Staff, core: Scheduler, fields: dict[str, Any], field: str | None,
        text: str) -> None:
    response = staff(*ALL).post(ADD, form(handler="report", **fields))
    assert response.status_code == 200
    errors = response.context["form"].errors
    key = field or "__all__"
    assert key in errors and text in " ".join(errors[key]), errors
    assert "Please correct" in response.content.decode()
    assert dynamic(core, str(fields.get("name", "nightly-report"))) is None


def test_adding_an_existing_name_is_refused(staff: Staff, core: Scheduler) -> None:
    core.add_job("taken", handler="report", every="1h")
    response = staff(*ALL).post(ADD, form(name="taken", every="5m"))
    assert response.status_code == 200
    assert "exists already" in str(response.context["form"].errors)
    job = dynamic(core, "taken")
    assert job is not None and job.schedule == "every 3600s"


def test_permissions(staff: Staff, core: Scheduler) -> None:
    core.add_job("kept", handler="report", every="1h")
    assert staff().get(LIST).status_code == 403
    viewer = staff("view_dynamicjob")
    listed = viewer.get(LIST).content.decode()
    assert "kept" in listed and "Add dynamic job" not in listed and "Delete" not in listed
    assert viewer.get(ADD).status_code == 403
    edit = viewer.get(CHANGE, {"job": "kept"}).content.decode()
    assert 'value="Save"' not in edit
    assert viewer.post(CHANGE + "?job=kept", form(name="kept", every="5m")).status_code == 403
    assert viewer.post(ADD, form(name="new")).status_code == 403
    assert viewer.post(DELETE + "?job=kept").status_code == 403
    job = dynamic(core, "kept")
    assert job is not None and job.schedule == "every 3600s"
    assert dynamic(core, "new") is None
    assert viewer.get(CHANGE, {"job": "nope"}).status_code == 404


def test_a_post_without_a_csrf_token_is_refused(staff: Staff, core: Scheduler) -> None:
    client = staff(*ALL, enforce_csrf=True)
    assert client.post(ADD, form()).status_code == 403
    assert dynamic(core, "nightly-report") is None


def test_the_admin_index_links_the_dynamic_jobs(staff: Staff, control_store: str) -> None:
    index = staff(*ALL).get("/admin/").content.decode()
    assert LIST in index and ADD in index


def test_a_job_added_disabled_is_stored_paused_in_one_change(staff: Staff, core: Scheduler,
                                                             worker: Scheduler) -> None:
    wait_for(lambda: offered(core), 10, "the worker's handler offer")
    client = staff(*ALL, name="dyn")
    response = client.post(ADD, form(name="quiet-report", enabled=None), follow=True)
    assert response.redirect_chain == [(LIST, 302)], response.content.decode()[:2000]
    job = dynamic(core, "quiet-report")
    assert job is not None and job.paused
    assert [(c.action, c.by) for c in core.changes("quiet-report")] == [("add", "django:dyn")]
