"""Celery entries in the dynamic-jobs admin: the app's tasks offered, args/kwargs/publish
options stored exactly as ``anarchon_celery.Entry.save()`` stores them (checked with
``Entry.load()``/``Entry.all()`` and against an entry saved with ``Entry`` itself), the
form errors naming the field, how the app is found, and permissions."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from celery import Celery
from celery.schedules import crontab
from django.conf import settings
from django.test import Client, override_settings

from anarchon import Scheduler
from anarchon_celery import HANDLER, Entry
from anarchon_django.control import runtime
from tests.django.control_support import messages_of, staff  # noqa: F401
from tests.django.support import wait_for
from tests.django.test_browser import _login, browser  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)

LIST = "/admin/anarchon_django/dynamicjob/"
ADD = LIST + "add/"
CHANGE = LIST + "change/"
DELETE = LIST + "delete/"
ALL = ("view_dynamicjob", "add_dynamicjob", "change_dynamicjob", "delete_dynamicjob")
UTC = timezone.utc

#: the app ANARCHON["CELERY_APP"] names; its store is ANARCHON's (no anarchon_backend)
APP = Celery("admin-celery", broker="memory://", set_as_current=False)
APP.conf.update(timezone="UTC", beat_schedule={"code-entry": {"task": "proj.report",
                                                                "schedule": 60.0}})


@APP.task(name="proj.report")
def report(*args: Any, **kwargs: Any) -> None:
    """A task of the app."""


@APP.task(name="proj.cleanup")
def cleanup() -> None:
    """Another task."""


Staff = Callable[..., Client]


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Scheduler]:
    """ANARCHON on a SQLite store of the test's own with CELERY_APP set; a checker
    scheduler on it."""
    config = {**settings.ANARCHON, "BACKEND": f"sqlite:///{tmp_path}/celery-admin.db",
              "CELERY_APP": "tests.django.test_admin_celery:APP"}
    with override_settings(ANARCHON=config):
        core = runtime.build_scheduler(instance_id="checker")
        try:
            yield core
        finally:
            core.close()


def form(**fields: Any) -> dict[str, Any]:
    base = {"name": "tenant-7-report", "handler": HANDLER, "task": "proj.report",
            "kind": "every", "every": "1h", "args": '[7, "daily"]',
            "kwargs": '{"full": true}', "queue": "reports", "routing_key": "rk.reports",
            "exchange": "ex", "priority": "4", "expires": "30", "headers": '{"h": "v"}',
            "max_attempts": "2", "enabled": "on"}
    base.update(fields)
    return {k: v for k, v in base.items() if v is not None}


OPTIONS = {"queue": "reports", "routing_key": "rk.reports", "exchange": "ex", "priority": 4,
           "expires": 30.0, "headers": {"h": "v"}, "anarchon": {"max_attempts": 2}}


def stored(core: Scheduler, name: str) -> tuple[Any, ...]:
    job = next(job for job in core.jobs() if job.name == name)
    return job.handler, job.params, job.schedule, job.options, job.paused


def test_add_edit_and_delete_a_celery_entry(staff: Staff, store: Scheduler) -> None:  # noqa: F811
    client = staff(*ALL, name="ops")
    page = client.get(ADD).content.decode()
    assert '<option value="celery:publish">' in page
    assert '<option value="proj.report">' in page and '<option value="proj.cleanup">' in page
    assert "celery.backend_cleanup" not in page  # Celery's own tasks are not offered
    response = client.post(ADD, form(), follow=True)
    assert response.redirect_chain == [(LIST, 302)], response.context["form"].errors
    assert messages_of(response)[0].startswith("Added Celery entry “tenant-7-report” "
                                               "(task proj.report, version ")
    entry = Entry.load(APP, "tenant-7-report")
    assert entry == Entry(APP, "tenant-7-report", "proj.report", timedelta(hours=1),
                          [7, "daily"], {"full": True}, OPTIONS, True)
    # byte for byte what Entry(...).save() stores
    Entry(APP, "same-by-code", "proj.report", 3600, [7, "daily"], {"full": True},
          OPTIONS).save()
    assert stored(store, "tenant-7-report") == stored(store, "same-by-code")
    assert [e.name for e in Entry.all(APP)] == ["code-entry", "same-by-code",
                                                "tenant-7-report"]

    edit = client.get(CHANGE, {"job": "tenant-7-report"}).content.decode()
    assert '<option value="proj.report" selected>' in edit
    assert re.search(r'name="args"[^>]*>\s*\[7, &quot;daily&quot;\]</textarea>', edit), edit
    assert re.search(r'name="kwargs"[^>]*>\s*\{&quot;full&quot;: true\}</textarea>', edit)
    assert 'name="queue" value="reports"' in edit and 'name="priority" value="4"' in edit
    assert 'name="expires" value="30.0"' in edit and 'name="max_attempts" value="2"' in edit
    assert re.search(r'name="headers"[^>]*>\s*\{&quot;h&quot;: &quot;v&quot;\}', edit)
    response = client.post(CHANGE + "?job=tenant-7-report",
                           form(kind="cron", every=None, cron="30 6 * * 1-5",
                                timezone="Europe/Berlin", task="proj.cleanup", args="",
                                kwargs="", headers="", expires="", enabled=None),
                           follow=True)
    assert response.redirect_chain == [(LIST, 302)], response.context["form"].errors
    assert "Updated Celery entry" in messages_of(response)[0]
    assert "it is paused" in messages_of(response)[0]
    entry = Entry.load(APP, "tenant-7-report")
    assert (entry.task, entry.args, entry.kwargs, entry.enabled) == ("proj.cleanup", [], {},
                                                                      False)
    assert entry.schedule == crontab(minute="30", hour="6", day_of_week="1-5")
    assert entry.options == {"queue": "reports", "routing_key": "rk.reports",
                             "exchange": "ex", "priority": 4,
                             "anarchon": {"max_attempts": 2, "timezone": "Europe/Berlin"}}
    assert [(c.action, c.by) for c in store.changes("tenant-7-report")] == [
        ("update", "django:ops"), ("add", "django:ops")]
    client.post(CHANGE + "?job=tenant-7-report", form(enabled="on"))
    assert Entry.load(APP, "tenant-7-report").enabled

    response = client.post(DELETE + "?job=tenant-7-report", follow=True)
    assert "Removed dynamic job “tenant-7-report”" in messages_of(response)[-1]
    assert [e.name for e in Entry.all(APP)] == ["code-entry", "same-by-code"]
    with pytest.raises(LookupError):
        Entry.load(APP, "tenant-7-report")


def test_a_one_off_date_time_like_a_clocked_task(staff: Staff, store: Scheduler) -> None:  # noqa: F811
    response = staff(*ALL).post(ADD, form(name="once", kind="at", every=None,
                                          at="2099-01-02 03:04:05"))
    assert response.status_code == 302, response.context["form"].errors
    entry = Entry.load(APP, "once")
    assert entry.schedule == datetime(2099, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert entry.options is not None and entry.options["anarchon"] == {"max_attempts": 2}


def test_a_crontab_on_both_day_fields_keeps_celerys_rule(staff: Staff,  # noqa: F811
                                                          store: Scheduler) -> None:
    """Celery runs ``0 0 1 * 1`` on a 1st that is a Monday (a cron job would run on
    either): the admin saves it, and the entry reads back as that crontab."""
    response = staff(*ALL).post(ADD, form(name="first-monday", kind="cron", every=None,
                                          cron="0 0 1 * 1"))
    assert response.status_code == 302, response.context["form"].errors
    entry = Entry.load(APP, "first-monday")
    assert entry.schedule == crontab(minute="0", hour="0", day_of_month="1", day_of_week="1")
    info = {job.name: job for job in store.jobs()}["first-monday"]
    assert info.kind == "custom" and "day-of-month AND day-of-week" in info.schedule


@pytest.mark.parametrize(("fields", "field", "text"), [
    ({"args": "[1,"}, "args", "Enter a valid JSON"),
    ({"args": '{"a": 1}'}, "args", "JSON list"),
    ({"kwargs": "[1]"}, "kwargs", "JSON object"),
    ({"headers": "not json"}, "headers", "Enter a valid JSON"),
    ({"kwargs": '{"x": NaN}'}, "kwargs", "must be JSON"),
    ({"task": "proj.nope"}, "task", "The Celery app has no task proj.nope"),
    ({"task": ""}, "task", "Choose the Celery task"),
    ({"params": '{"a": 1}'}, "params", "not params"),
    ({"offset": "10s"}, "offset", "UTC grid"),
    ({"expires": "soon"}, "expires", "neither seconds nor"),
    ({"priority": "300"}, "priority", "255"),
    ({"kind": "cron", "every": None, "cron": "0 0 3 * * *"}, "cron", "5 fields"),
    ({"name": "code-entry"}, "name", "beat_schedule"),
])
def test_bad_input_names_the_field(staff: Staff, store: Scheduler, fields: dict[str, Any],  # noqa: F811
                                   field: str, text: str) -> None:
    response = staff(*ALL).post(ADD, form(**fields))
    assert response.status_code == 200
    errors = response.context["form"].errors
    assert field in errors and text in " ".join(errors[field]), errors
    assert [e.name for e in Entry.all(APP)] == ["code-entry"]


def test_adding_an_existing_name_is_refused(staff: Staff, store: Scheduler) -> None:  # noqa: F811
    Entry(APP, "taken", "proj.report", 60).save()
    response = staff(*ALL).post(ADD, form(name="taken"))
    assert "exists already" in " ".join(response.context["form"].errors["name"])
    assert Entry.load(APP, "taken").schedule == timedelta(seconds=60)


def test_permissions(staff: Staff, store: Scheduler) -> None:  # noqa: F811
    Entry(APP, "guarded", "proj.report", 60, [1], {"k": 2}, {"queue": "q"}).save()
    viewer = staff("view_dynamicjob")
    page = viewer.get(CHANGE, {"job": "guarded"}).content.decode()
    # Django's read-only rendering: the values as text, no inputs at all
    assert '<div class="readonly">proj.report</div>' in page
    assert '<div class="readonly">q</div>' in page
    assert '<div class="readonly">[1]</div>' in page
    assert '<div class="readonly">{&quot;k&quot;: 2}</div>' in page
    shown = page[page.index('id="dynamicjob_form"'):page.index("</form>")]
    assert not re.search(r"<(input|select|textarea)(?![^>]*type=\"hidden\")", shown), shown
    assert 'value="Save"' not in page
    assert viewer.post(CHANGE + "?job=guarded", form(name="guarded")).status_code == 403
    assert viewer.post(ADD, form()).status_code == 403
    assert viewer.post(DELETE + "?job=guarded").status_code == 403
    assert staff("add_dynamicjob").post(CHANGE + "?job=guarded",
                                        form(name="guarded")).status_code == 403
    assert Entry.load(APP, "guarded").args == [1]
    assert [e.name for e in Entry.all(APP)] == ["code-entry", "guarded"]


def test_no_celery_fields_without_an_app(staff: Staff, store: Scheduler) -> None:  # noqa: F811
    client = staff(*ALL)
    with override_settings(ANARCHON={**settings.ANARCHON, "CELERY_APP": False}):
        page = client.get(ADD).content.decode()
        assert 'name="task"' not in page and 'name="params"' in page
    with override_settings(ANARCHON={**settings.ANARCHON, "CELERY_APP": "no.such:app"}):
        page = client.get(ADD).content.decode()
        assert "ANARCHON[&#x27;CELERY_APP&#x27;] &#x27;no.such:app&#x27; cannot be " \
               "imported" in page
        assert 'name="task"' not in page


def test_without_the_setting_the_current_app_is_used(staff: Staff,  # noqa: F811
                                                     store: Scheduler) -> None:
    from celery import _state

    tls: Any = getattr(_state, "_tls")  # noqa: B009 - not in celery-types' stubs
    previous = tls.current_app
    with override_settings(ANARCHON={k: v for k, v in settings.ANARCHON.items()
                                     if k != "CELERY_APP"}):
        assert 'name="task"' not in staff(*ALL).get(ADD).content.decode()
        current = Celery("current-" + uuid.uuid4().hex[:6], broker="memory://")
        current.task(name="proj.current_only")(cleanup.run)
        try:
            page = staff(*ALL).get(ADD).content.decode()
            assert '<option value="proj.current_only">' in page
        finally:
            tls.current_app = previous
            current.close()


@pytest.mark.slow
def test_a_celery_entry_through_a_real_browser(browser: Any, live_server: Any,  # noqa: F811
                                               store: Scheduler, tmp_path: Path) -> None:
    """Fill the Celery fields in Chromium, save, and screenshot the entry's edit form
    (``ANARCHON_SCREENSHOTS=<dir>`` keeps the pictures)."""
    import os

    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    from tests.django.control_support import make_user

    make_user("celery-ops", *ALL)
    _login(browser, live_server, "celery-ops")
    browser.get(f"{live_server.url}{ADD}")
    fill = {"name": "tenant-42-invoices", "every": "15m", "args": '[42]',
            "kwargs": '{"dry_run": false}', "queue": "billing",
            "routing_key": "billing.invoices", "priority": "6", "expires": "600",
            "headers": '{"tenant": "42"}', "max_attempts": "1"}
    for field, value in fill.items():
        browser.find_element(By.NAME, field).send_keys(value)
    Select(browser.find_element(By.NAME, "handler")).select_by_value(HANDLER)
    Select(browser.find_element(By.NAME, "task")).select_by_value("proj.report")
    browser.find_element(By.CSS_SELECTOR, "input[name=_save]").click()
    wait_for(lambda: "Added Celery entry" in browser.page_source, 10, "the saved message")
    entry = Entry.load(APP, "tenant-42-invoices")
    assert (entry.task, entry.args, entry.kwargs) == ("proj.report", [42], {"dry_run": False})
    assert entry.options == {"queue": "billing", "routing_key": "billing.invoices",
                             "priority": 6, "expires": 600.0, "headers": {"tenant": "42"},
                             "anarchon": {"max_attempts": 1}}

    browser.get(f"{live_server.url}{CHANGE}?job=tenant-42-invoices")
    shots = [tmp_path] + ([Path(os.environ["ANARCHON_SCREENSHOTS"])]
                          if os.environ.get("ANARCHON_SCREENSHOTS") else [])
    height = browser.execute_script("return document.documentElement.scrollHeight")
    browser.set_window_size(1280, min(int(height) + 40, 2600))
    for scheme in ("light", "dark"):
        browser.execute_cdp_cmd("Emulation.setEmulatedMedia", {
            "features": [{"name": "prefers-color-scheme", "value": scheme}]})
        for folder in shots:
            browser.save_screenshot(str(folder / f"django-admin-celery-entry-{scheme}.png"))
    assert (tmp_path / "django-admin-celery-entry-light.png").stat().st_size > 10_000


def test_a_note_when_the_beats_use_another_store(staff: Staff, store: Scheduler,  # noqa: F811
                                                 tmp_path: Path) -> None:
    client = staff(*ALL)
    assert "the beats run them only" not in client.get(ADD).content.decode()
    APP.conf.anarchon_backend = f"sqlite:///{tmp_path}/elsewhere.db"
    try:
        page = client.get(ADD).content.decode()
    finally:
        APP.conf.anarchon_backend = None
    assert "elsewhere.db" in page and "the beats run them only when both are the same " \
        "store" in page
    with override_settings(ANARCHON={**settings.ANARCHON, "BACKEND": "django"}):
        assert "the beats run them only" not in client.get(ADD).content.decode()


def test_beats_take_the_bare_django_backend_name() -> None:
    """``ANARCHON = {"BACKEND": "django"}`` gives the beats the ORM store, built by
    anarchon_django as ``manage.py anarchon run`` builds it (same alias, same tables)."""
    from anarchon_celery.beat.config import resolve
    from anarchon_django.store.backend import DjangoBackend

    with override_settings(ANARCHON={"BACKEND": "django"}):
        backend = resolve(APP).build_backend()
    assert isinstance(backend, DjangoBackend)
    assert backend.name.startswith("django:")
