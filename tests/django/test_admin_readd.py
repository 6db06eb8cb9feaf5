"""The dynamic jobs' admin, delete then add again under the same name, while a running
instance ran the job (and so registered it in the store): the add is accepted at once,
never refused as "declared in code", and the instance runs the new job."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.test import Client

from anarchon import Scheduler
from tests.django import control_support
from tests.django.control_support import messages_of
from tests.django.support import wait_for

pytestmark = pytest.mark.django_db(transaction=True)

LIST = "/admin/anarchon_django/dynamicjob/"
ALL = ("view_dynamicjob", "add_dynamicjob", "change_dynamicjob", "delete_dynamicjob")


def form(params: str) -> dict[str, str]:
    return {"name": "readd", "handler": "report", "kind": "every", "every": "1s",
            "params": params, "enabled": "on"}


def ran(params: object, since: int) -> bool:
    return any(r["job"] == "readd" and r["params"] == params
               for r in control_support.REPORTS[since:])


def test_delete_and_add_again_at_once(staff: Callable[..., Client], core: Scheduler,
                                      worker: Scheduler) -> None:
    wait_for(lambda: "report" in {n for names in core.offered_handlers().values()
                                  for n in names}, 10, "the worker's handler offer")
    client = staff(*ALL)
    before = len(control_support.REPORTS)
    assert client.post(LIST + "add/", form('{"n": 1}')).status_code == 302
    wait_for(lambda: ran({"n": 1}, before), 15, "a run of the first job")
    response = client.post(LIST + "delete/?job=readd", follow=True)
    assert "Removed dynamic job “readd”" in messages_of(response)[-1]
    response = client.post(LIST + "add/", form('{"n": 2}'), follow=True)
    assert response.redirect_chain == [(LIST, 302)], response.content.decode()[:3000]
    assert messages_of(response)[-1].startswith("Added dynamic job “readd”")
    wait_for(lambda: ran({"n": 2}, before), 15, "a run of the re-added job")
    assert [c.action for c in core.changes("readd")] == ["add", "remove", "add"]
