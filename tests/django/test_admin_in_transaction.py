"""The admin's runtime control inside the caller's transaction (a ``TestCase``'s, and
``ATOMIC_REQUESTS``): GET the Jobs page, then Pause, Resume, Reschedule, add, edit and
delete a dynamic job and a Celery entry, each in seconds, on the ``"django"`` store.

The pages read the control records without a lock and write them on the request's own
connection (``anarchon_django.control.direct_control``); before, a read locked the generation
row in the test's transaction and the change then waited for it on a second connection
(PostgreSQL: for ever, MariaDB: 50 s, SQLite: "database table is locked"). The
database is the suite's (``ANARCHON_DJANGO_DB``: sqlite, postgres or mariadb).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any

import pytest
from django.conf import settings
from django.db import OperationalError, connections, transaction
from django.test import Client, override_settings

from anarchon_django.control import controls, direct, runtime
from anarchon_django.store.operations import Store
from tests.django.control_support import messages_of

pytestmark = [pytest.mark.django_db, pytest.mark.timeout(120)]

JOBS = "/admin/anarchon_django/job/"
DETAIL = JOBS + "detail/"
DYNAMIC = "/admin/anarchon_django/dynamicjob/"
#: a step that waited for a lock its own request holds takes tens of seconds or for ever
STEP = 5.0
ALL = ("view_job", "change_job", "view_dynamicjob", "add_dynamicjob", "change_dynamicjob",
       "delete_dynamicjob")

Staff = Callable[..., Client]


@pytest.fixture(params=[False, True], ids=["TestCase", "ATOMIC_REQUESTS"])
def atomic_requests(request: pytest.FixtureRequest) -> Iterator[bool]:
    """Each test in a ``TestCase`` transaction, with and without ``ATOMIC_REQUESTS``."""
    settings_dict = connections["default"].settings_dict
    before = settings_dict["ATOMIC_REQUESTS"]
    settings_dict["ATOMIC_REQUESTS"] = request.param
    config = {**settings.ANARCHON, "BACKEND": "django",
              "CELERY_APP": "tests.django.test_admin_celery:APP"}
    with override_settings(ANARCHON=config):
        try:
            yield bool(request.param)
        finally:
            settings_dict["ATOMIC_REQUESTS"] = before


def timed(step: str, call: Callable[[], Any]) -> Any:
    started = time.monotonic()
    result = call()
    took = time.monotonic() - started
    assert took < STEP, f"{step} took {took:.1f} s: it waited for a lock"
    return result


def test_jobs_page_then_pause_resume_reschedule(staff: Staff, atomic_requests: bool) -> None:
    client = staff(*ALL, name="ops")
    page = timed("GET Jobs", lambda: client.get(JOBS))
    assert page.status_code == 200 and b'data-job="greet"' in page.content
    paused = timed("Pause", lambda: client.post(JOBS + "pause/", {"job": "greet"},
                                                follow=True))
    assert messages_of(paused)[0].startswith("Paused “greet” (version 1)")
    assert controls.find("greet").paused  # type: ignore[union-attr]
    resumed = timed("Resume", lambda: client.post(JOBS + "resume/", {"job": "greet"},
                                                  follow=True))
    assert messages_of(resumed)[0].startswith("Resumed “greet” (version 2)")
    moved = timed("Reschedule", lambda: client.post(
        DETAIL + "?job=greet", {"kind": "cron", "cron": "30 4 * * 1",
                                "timezone": "Asia/Tokyo"}, follow=True))
    assert "cron 30 4 * * 1 (Asia/Tokyo)" in messages_of(moved)[0]
    assert controls.find("greet").schedule == "cron 30 4 * * 1 (Asia/Tokyo)"  # type: ignore[union-attr]
    assert [c.action for c in controls.changes("greet")] == ["reschedule", "resume", "pause"]
    page = timed("GET Jobs again", lambda: client.get(JOBS))
    assert b'data-job="greet" data-paused="1"' not in page.content


def test_dynamic_job_and_celery_entry(staff: Staff, atomic_requests: bool) -> None:
    store = direct.store_of(runtime.get_scheduler())
    assert store is not None
    store.offer_handlers("worker-1", ["report"])  # as a running instance would
    client = staff(*ALL, name="dyn")
    page = timed("GET add", lambda: client.get(DYNAMIC + "add/"))
    assert b'<option value="report">' in page.content
    assert b'<option value="proj.report">' in page.content
    base = {"name": "nightly-report", "handler": "report", "kind": "every", "every": "1h",
            "params": '{"to": "ops"}', "enabled": "on"}
    added = timed("add", lambda: client.post(DYNAMIC + "add/", base, follow=True))
    assert messages_of(added)[0].startswith("Added dynamic job “nightly-report”"), \
        added.content.decode()[:3000]
    edited = timed("edit", lambda: client.post(DYNAMIC + "change/?job=nightly-report",
                                               {**base, "every": "2h"}, follow=True))
    assert messages_of(edited)[0].startswith("Updated dynamic job “nightly-report”")
    deleted = timed("delete", lambda: client.post(DYNAMIC + "delete/?job=nightly-report",
                                                  follow=True))
    assert "Removed dynamic job “nightly-report”" in messages_of(deleted)[0]

    entry = {"name": "tenant-7", "handler": "celery:publish", "task": "proj.report",
             "kind": "every", "every": "1h", "args": "[7]", "kwargs": "{}",
             "enabled": "on"}
    added = timed("add entry", lambda: client.post(DYNAMIC + "add/", entry, follow=True))
    assert messages_of(added)[0].startswith("Added Celery entry “tenant-7”"), \
        added.content.decode()[:3000]
    edited = timed("edit entry", lambda: client.post(
        DYNAMIC + "change/?job=tenant-7", {**entry, "every": "2h"}, follow=True))
    assert messages_of(edited)[0].startswith("Updated Celery entry “tenant-7”")
    deleted = timed("delete entry", lambda: client.post(DYNAMIC + "delete/?job=tenant-7",
                                                        follow=True))
    assert "tenant-7" in messages_of(deleted)[0]
    assert not [info for info in controls.dynamic_jobs()]
    page = timed("GET Jobs", lambda: client.get(JOBS))
    assert page.status_code == 200


@contextmanager
def held_by_another_connection(alias: str, lock: Callable[[Store], AbstractContextManager[Any]]
                               ) -> Iterator[None]:
    """The row locks ``lock(store)`` takes (a context manager), held by another
    connection in a transaction, in a thread of its own, until the block ends."""
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        try:
            with transaction.atomic(using=alias), lock(Store(alias)):
                held.set()
                release.wait(30)
        finally:
            connections.close_all()

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert held.wait(10), "the other connection did not get its lock"
        yield
    finally:
        release.set()
        holder.join(10)


@pytest.mark.django_db(transaction=True)
def test_a_change_waits_at_most_the_lock_bound(staff: Staff, monkeypatch: pytest.MonkeyPatch
                                               ) -> None:
    """Another connection holds the control generation row (a change not committed):
    Pause gives up after ``LOCK_WAIT`` (SQLite: the connection's 5 s timeout) with a
    message on the page, and changes nothing."""
    from anarchon_django.control import direct_control

    monkeypatch.setattr(direct_control, "LOCK_WAIT", 1.0)
    store = direct.store_of(runtime.get_scheduler())
    assert store is not None
    client = staff(*ALL, name="waiter")
    # the generation row's lock, as a change holds it
    with held_by_another_connection(store.alias, lambda other: other.control.locked()):
        started = time.monotonic()
        response = client.post(JOBS + "pause/", {"job": "greet"}, follow=True)
        took = time.monotonic() - started
        assert response.status_code == 200
        [message] = messages_of(response)
        assert message.startswith("“greet” was not paused:"), message
        assert ("stayed locked by another transaction for 1 s" in message
                or "database is locked" in message), message
        bound = 1.0 if connections["default"].vendor != "sqlite" else 5.0
        assert bound - 0.2 < took < bound + 3, took
    assert not controls.find("greet").paused  # type: ignore[union-attr]


@pytest.mark.django_db(transaction=True)
def test_run_now_and_forget_wait_at_most_the_lock_bound(
        staff: Staff, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another connection holds job ``greet``'s row (a claim or a request not committed):
    Run now gives up after ``LOCK_WAIT`` (SQLite: the connection's 5 s timeout) with a
    message on the page, and ``forget`` with ``StoreError``; neither changes anything."""
    from anarchon.backends.base import JobSpec
    from anarchon.errors import StoreError

    monkeypatch.setattr(runtime, "LOCK_WAIT", 1.0)
    store = direct.store_of(runtime.get_scheduler())
    assert store is not None
    store.register([JobSpec("greet", "every", "every 1h")])
    client = staff(*ALL, "run_job", name="runner")
    bound = 1.0 if connections["default"].vendor != "sqlite" else 5.0
    def job_row(other: Store) -> AbstractContextManager[Any]:  # as a claim holds it
        return nullcontext(other.tables.lock_job("greet"))

    with held_by_another_connection(store.alias, job_row):
        started = time.monotonic()
        response = client.post(JOBS + "run/", {"job": "greet"}, follow=True)
        took = time.monotonic() - started
        [message] = messages_of(response)
        assert message.startswith("The manual run of “greet” was not requested:"), message
        assert ("job 'greet''s row stayed locked by another transaction for 1 s" in message
                or "database is locked" in message), message
        assert bound - 0.2 < took < bound + 3, took
        started = time.monotonic()
        with pytest.raises((StoreError, OperationalError),
                           match=r"stayed locked|database is locked"):
            runtime.forget("greet")
        took = time.monotonic() - started
        assert bound - 0.2 < took < bound + 3, took
    assert store.manual_pending("greet") is None  # no request was stored
    assert store.tables.jobs().filter(name="greet").exists()  # nothing was forgotten
