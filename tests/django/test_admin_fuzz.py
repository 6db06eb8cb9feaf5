"""A fuzz of every admin page's query string and every admin form (hypothesis): no
answer is a 500, a refused form stores nothing, and what is stored can run (the
bounds of ``anarchon_django.admin.form_limits``). On the ``"django"`` store, in a
``TestCase`` transaction, on the suite's database (``ANARCHON_DJANGO_DB``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from urllib.parse import urlencode

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client, override_settings
from django.utils import timezone
from hypothesis import HealthCheck, example, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from anarchon.control.changes import Control
from anarchon.durations import parse_duration
from anarchon_django.admin import form_limits
from anarchon_django.control import direct, runtime

pytestmark = [pytest.mark.django_db, pytest.mark.timeout(600)]

ADMIN = "/admin/anarchon_django/"
PAGES = ("run/", "run/detail/", "job/", "job/detail/", "dynamicjob/", "dynamicjob/add/",
         "dynamicjob/change/", "dynamicjob/delete/")
KEYS = ("job", "status", "reason", "instance", "date", "q", "o", "p", "id", "slot",
        "attempt", "manual", "framework", "next")
#: text of every kind but lone surrogates (a URL cannot carry them)
TEXT = st.text(st.characters(exclude_categories=["Cs"]), max_size=40)
NUMBERISH = st.one_of(st.integers(-2**70, 2**70).map(str), st.sampled_from(
    ["0", "-1", "1e9", "9999-12-31", "0001-01-01", "today", "7d", "NaN", "", " "]))
VALUE = st.one_of(TEXT, NUMBERISH)
FUZZ = hypothesis_settings(max_examples=60, deadline=None, derandomize=True,
                           suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                  HealthCheck.too_slow])
ANSWERS = {200, 302, 400, 403, 404, 405}


@pytest.fixture
def admin() -> Iterator[Client]:
    config = {**settings.ANARCHON, "BACKEND": "django",
              "CELERY_APP": "tests.django.test_admin_celery:APP"}
    with override_settings(ANARCHON=config):
        store = direct.store_of(runtime.get_scheduler())
        assert store is not None
        store.offer_handlers("worker-1", ["report"])
        client = Client()
        client.force_login(User.objects.create_superuser("fuzz", "f@example.com", "pw"))
        yield client


def records() -> dict[str, tuple[int, str]]:
    store = direct.store_of(runtime.get_scheduler())
    assert store is not None
    return {name: (record.version, record.text)
            for name, record in store.peek_controls().records.items()}


def assert_runnable(name: str, text: str) -> None:
    """A stored dynamic job is one the bounds let through."""
    control = Control.decode(text)
    if control.dynamic is None or control.removed:
        return
    assert not form_limits.has_control_characters(name), name
    size = len(json.dumps(control.dynamic.params, ensure_ascii=False).encode())
    assert size <= form_limits.MAX_PARAMS_BYTES + 1024, size
    schedule = control.schedule
    assert schedule is not None
    if schedule.kind == "every":
        assert float(schedule.when) >= form_limits.MIN_EVERY, schedule.describe()


@given(page=st.sampled_from(PAGES), query=st.dictionaries(
    st.one_of(st.sampled_from(KEYS), TEXT), VALUE, max_size=5))
@example(page="run/", query={"date": "9999-12-31"})  # was an OverflowError
@example(page="run/detail/", query={"id": str(2**70)})
@example(page="run/", query={"job": "a\x00b"})
@example(page="run/detail/", query={"job": "a\x00b", "slot": "1", "attempt": "1"})
@example(page="job/detail/", query={"job": "a\x00b"})
@FUZZ
def test_no_query_string_is_a_500(admin: Client, page: str, query: dict[str, str]) -> None:
    response = admin.get(ADMIN + page, query)
    assert response.status_code in ANSWERS, (page, query, response.status_code)


DURATION = st.one_of(TEXT, st.sampled_from(["1ms", "0.5", "0", "-5s", "1s", "5m", "1h",
                                            "1e308", "2d", "nan", "inf"]))
FORM = st.fixed_dictionaries({
    "name": st.one_of(TEXT, st.sampled_from(["ok-job", "line\nbreak", "tab\tname", "x" * 201,
                                             "greet", " padded "])),
    "handler": st.sampled_from(["report", "celery:publish", "", "nope"]),
    "kind": st.sampled_from(["every", "cron", "at", "bogus"]),
    "every": DURATION, "offset": DURATION,
    "cron": st.one_of(TEXT, st.sampled_from(["0 3 * * *", "* * * * * *", "61 * * * *"])),
    "timezone": st.one_of(TEXT, st.sampled_from(["Asia/Kolkata", "UTC", "Mars/Base"])),
    "at": st.one_of(TEXT, st.sampled_from(["2001-01-01 00:00", "2999-01-01 00:00",
                                           "9999-12-31 23:59:59", "2030-02-30 10:00"])),
    "params": st.one_of(TEXT, st.sampled_from(['{"a": 1}', "[1, 2]", "NaN",
                                               json.dumps("x" * 20_000)])),
    "task": st.sampled_from(["proj.report", "proj.cleanup", "nope", ""]),
    "args": st.one_of(TEXT, st.sampled_from(["[1]", "{}", json.dumps(["y" * 20_000])])),
    "kwargs": st.one_of(TEXT, st.sampled_from(["{}", '{"a": 1}', "[]"])),
    "priority": VALUE, "expires": VALUE, "headers": VALUE,
    "jitter": DURATION, "max_late": DURATION, "timeout": DURATION,
    "overlap": st.sampled_from(["", "skip", "allow", "bogus"]),
    "max_attempts": VALUE, "catch_up": DURATION, "history_size": VALUE,
    "history_ttl": DURATION, "enabled": st.sampled_from(["on", ""]),
})


VALID = {"name": "ok-job", "handler": "report", "kind": "every", "every": "1h",
         "offset": "", "cron": "", "timezone": "", "at": "", "params": "{}",
         "task": "", "args": "", "kwargs": "", "priority": "", "expires": "",
         "headers": "", "jitter": "", "max_late": "", "timeout": "", "overlap": "",
         "max_attempts": "", "catch_up": "", "history_size": "", "history_ttl": "",
         "enabled": "on"}


@given(data=FORM, editing=st.booleans())
@example(data={**VALID, "every": "1ms"}, editing=False)
@example(data={**VALID, "kind": "at", "at": "2001-01-01 00:00"}, editing=False)
@example(data={**VALID, "params": json.dumps("x" * 2_000_000)}, editing=False)
@example(data={**VALID, "name": "line\nbreak"}, editing=False)
@example(data={**VALID, "handler": "celery:publish", "task": "proj.report",
               "args": json.dumps(["y" * 20_000])}, editing=False)
@FUZZ
def test_the_dynamic_job_form_refuses_what_cannot_run(admin: Client, data: dict[str, str],
                                                      editing: bool) -> None:
    before = records()
    url = ADMIN + ("dynamicjob/add/" if not editing or not before
                   else "dynamicjob/change/?job=" + sorted(before)[0])
    response = admin.post(url, data)
    assert response.status_code in ANSWERS, (data, response.status_code)
    after = records()
    if response.status_code != 302:
        assert after == before, data  # refused: nothing stored
    for name, (_, text) in after.items():
        if before.get(name, (None, None))[1] != text:
            assert_runnable(name, text)
    if response.status_code == 302 and data["kind"] == "at" and after != before:
        changed = [n for n in after if after[n] != before.get(n)]
        for name in changed:
            control = Control.decode(after[name][1])
            if control.schedule is not None and control.schedule.kind == "at":
                assert float(control.schedule.when) > timezone.now().timestamp()


@given(job=st.one_of(TEXT, st.sampled_from(["greet", "nightly-fail", "none"])),
       action=st.sampled_from(["pause/", "resume/", "run/"]), next_url=VALUE)
@FUZZ
def test_no_control_post_is_a_500(admin: Client, job: str, action: str,
                                  next_url: str) -> None:
    response = admin.post(ADMIN + "job/" + action, {"job": job, "next": next_url})
    assert response.status_code in ANSWERS, (job, action, response.status_code)


@given(job=st.one_of(TEXT, st.sampled_from(["greet", "none"])), confirm=VALUE)
@FUZZ
def test_no_delete_post_is_a_500(admin: Client, job: str, confirm: str) -> None:
    before = records()
    response = admin.post(ADMIN + "dynamicjob/delete/?" + urlencode({"job": job}),
                          {"post": confirm})
    assert response.status_code in ANSWERS, (job, response.status_code)
    assert records() == before  # no dynamic job of these names exists: nothing removed


@given(data=st.fixed_dictionaries({"kind": st.sampled_from(["every", "cron", "reset", "x"]),
                                   "every": DURATION, "offset": DURATION,
                                   "cron": TEXT, "timezone": TEXT}),
       job=st.sampled_from(["greet", "nightly-fail", "none", "a\x00b"]))
@FUZZ
def test_the_schedule_form_refuses_what_cannot_run(admin: Client, data: dict[str, str],
                                                   job: str) -> None:
    before = records()
    response = admin.post(ADMIN + "job/detail/", data, QUERY_STRING=urlencode({"job": job}))
    assert response.status_code in ANSWERS, (data, response.status_code)
    after = records()
    if response.status_code != 302:
        assert after == before, data
    for name, (_, text) in after.items():
        control = Control.decode(text)
        if control.schedule is not None and control.schedule.kind == "every" \
                and before.get(name, (None, None))[1] != text:
            assert parse_duration(control.schedule.when) >= form_limits.MIN_EVERY


@pytest.mark.parametrize(("change", "field", "words"), [
    ({"every": "1ms"}, "every", "at least 1 s"),
    ({"every": "0.5"}, "every", "at least 1 s"),
    ({"kind": "at", "at": "2001-01-01 00:00"}, "at", "not in the future"),
    ({"params": json.dumps("x" * 20_000)}, "params", "at most 16,384"),
    ({"name": "line\nbreak"}, "name", "control characters"),
    ({"name": "nul\x00here"}, "name", "Null characters"),  # Django's own check
    ({"handler": "celery:publish", "task": "proj.report", "params": "",
      "args": json.dumps(["y" * 20_000])}, "args", "at most 16,384"),
], ids=["1ms", "half-second", "past-date", "20kB-params", "newline", "nul", "20kB-args"])
def test_each_bound_is_a_message_on_its_field(admin: Client, change: dict[str, str],
                                              field: str, words: str) -> None:
    before = records()
    response = admin.post(ADMIN + "dynamicjob/add/", {**VALID, **change})
    assert response.status_code == 200
    errors = response.context["form"].errors
    assert words in " ".join(errors.get(field, [])), errors
    assert records() == before


def test_a_reschedule_below_the_minimum_is_a_message_on_the_field(admin: Client) -> None:
    before = records()
    response = admin.post(ADMIN + "job/detail/?job=greet", {"kind": "every", "every": "10ms"})
    assert response.status_code == 200
    assert "at least 1 s" in " ".join(response.context["form"].errors["every"])
    assert records() == before


def test_the_bounds_let_what_can_run_through(admin: Client) -> None:
    response = admin.post(ADMIN + "dynamicjob/add/",
                          {**VALID, "every": "1s", "params": json.dumps("x" * 10_000)})
    assert response.status_code == 302, response.context["form"].errors
    response = admin.post(ADMIN + "dynamicjob/add/", {**VALID, "name": "once", "kind": "at",
                                                      "at": "2999-01-01 00:00"})
    assert response.status_code == 302, response.context["form"].errors
    assert {"ok-job", "once"} <= set(records())
