"""One change per click: two Pause clicks at once record one pause, the other is
refused with a message; Pause of a paused job and Resume of a running one change
nothing; Run now on a paused job says that the manual run still runs. On the
``"django"`` store (the suite's database) and on the core's SQLite store."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.messages import get_messages
from django.db import connections
from django.test import Client

from anarchon import Scheduler
from tests.django.control_support import messages_of

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(120)]

JOBS = "/admin/anarchon_django/job/"
Staff = Callable[..., Client]


def test_two_pause_clicks_at_once_record_one_change(staff: Staff, core: Scheduler) -> None:
    clients = [staff("view_job", "change_job", name=f"ops{n}") for n in range(2)]
    barrier = threading.Barrier(2)
    said: list[str] = []
    failed: list[BaseException] = []

    def click(client: Client) -> None:
        try:
            barrier.wait(10)
            response = client.post(JOBS + "pause/", {"job": "greet"})
            # this request's own messages (response.context is shared between threads)
            said.extend(str(m) for m in get_messages(response.wsgi_request))
        except BaseException as exc:  # reported below
            failed.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=click, args=(client,)) for client in clients]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not failed, failed
    assert sorted(m.split(" ", 1)[0] for m in said) == ["Paused", "“greet”"], said
    [refused] = [m for m in said if m.startswith("“greet”")]
    assert "already paused" in refused and "nothing changed" in refused
    assert [c.action for c in core.changes("greet")] == ["pause"]


def test_a_repeated_click_changes_nothing(staff: Staff, core: Scheduler) -> None:
    client = staff("view_job", "change_job", name="ops")

    def post(action: str) -> list[str]:
        return messages_of(client.post(JOBS + action, {"job": "greet"}, follow=True))

    assert "not paused: nothing changed" in post("resume/")[0]
    assert post("pause/")[0].startswith("Paused “greet” (version 1)")
    assert "already paused: nothing changed" in post("pause/")[0]
    assert post("resume/")[0].startswith("Resumed “greet” (version 2)")
    assert [c.action for c in core.changes("greet")] == ["resume", "pause"]


def test_run_now_on_a_paused_job_says_the_run_still_runs(staff: Staff,
                                                         core: Scheduler) -> None:
    client = staff("view_job", "change_job", "run_job", name="ops")
    client.post(JOBS + "pause/", {"job": "greet"})
    page = client.get(JOBS).content.decode()
    assert 'data-job="greet" title="paused: a manual run still runs once' in page
    response: Any = client.post(JOBS + "run/", {"job": "greet"}, follow=True)
    [message] = messages_of(response)
    assert message.startswith("Requested a manual run of “greet”: “greet” is paused: this "
                              "manual run still runs, once"), message
