"""One Django project, one store, jobs marked by framework (issue 24): the project's plain
jobs, a Celery beat entry (its beat on the project's store, found through ``ANARCHON``)
and a Dramatiq mark (scheduled by a process of its own on the project's store, as
``anarchon-dramatiq`` does) — the admin Jobs page and ``manage.py anarchon list`` show
each with its framework, and the Jobs page filters by it."""

from __future__ import annotations

import io
import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.core.management import call_command
from django.test import Client

from anarchon import Scheduler
from anarchon_django.control import runtime
from tests.django.control_support import staff  # noqa: F401

celery = pytest.importorskip("celery")
dramatiq = pytest.importorskip("dramatiq")

pytestmark = pytest.mark.django_db(transaction=True)

JOBS = "/admin/anarchon_django/job/"

#: a beat whose app names no store: it runs on the project's (ANARCHON, the test's table)
APP = celery.Celery("frameworks-beat", broker="memory://", set_as_current=False)
APP.conf.update(timezone="UTC", result_expires=None,
                beat_schedule={"beat-report": {"task": "proj.report", "schedule": 3600.0}})


@pytest.fixture
def project(table: str) -> Iterator[None]:
    """The project's store (``table``) with a Celery beat and a Dramatiq scheduler on it,
    both started (their jobs registered) and stopped again before the pages are read."""
    from dramatiq.brokers.stub import StubBroker

    import anarchon_dramatiq as ad
    from anarchon_celery import Scheduler as Beat
    from anarchon_dramatiq.discovery import project_store

    broker = StubBroker()

    @ad.every("1h", name="actor-refresh")
    @dramatiq.actor(broker=broker)
    def frameworks_refresh() -> None: ...

    beat = Beat(APP)  # not lazy: beat's setup_schedule() starts it, as `celery beat`
    try:
        backend = project_store()
        assert backend is not None
        sender = Scheduler(backend, instance_id="dramatiq-1")
        assert ad.register_actors(sender, broker) == ["actor-refresh"]
        sender.start()
        sender.stop(5)
    finally:
        beat.close()
    runtime.reset()
    yield
    runtime.reset()


def _rows(page: str) -> dict[str, str]:
    """Job name -> framework, from the Jobs page's rows."""
    return dict(re.findall(r'<tr class="anarchon-job[^"]*" data-job="([^"]+)"[^>]*'
                           r'data-framework="([^"]+)"', page))


def test_admin_and_list_show_each_job_with_its_framework(
        project: None, staff: Callable[..., Client]) -> None:  # noqa: F811
    client = staff("view_job")
    page = client.get(JOBS)
    assert page.status_code == 200
    rows = _rows(page.content.decode())
    assert rows["greet"] == "plain" and rows["nightly-fail"] == "plain"
    assert rows["beat-report"] == "celery"
    assert rows["actor-refresh"] == "dramatiq"
    assert set(rows.values()) == {"plain", "celery", "dramatiq"}
    text = page.content.decode()
    assert ">Framework</span>" in text and 'id="filter-framework"' in text

    only: dict[str, Any] = {}
    for framework in ("celery", "dramatiq", "plain"):
        chosen = _rows(client.get(JOBS, {"framework": framework}).content.decode())
        assert set(chosen.values()) == {framework}, (framework, chosen)
        only[framework] = set(chosen)
    assert only["celery"] == {"beat-report"} and only["dramatiq"] == {"actor-refresh"}
    assert "greet" in only["plain"] and "beat-report" not in only["plain"]

    detail = client.get(JOBS + "detail/", {"job": "beat-report"}).content.decode()
    assert re.search(r'id="anarchon-framework">celery — a Celery beat entry', detail)

    out = io.StringIO()
    call_command("anarchon", "list", stdout=out)
    lines = out.getvalue().splitlines()
    assert lines[0].split()[:3] == ["JOB", "FRAMEWORK", "SCHEDULE"]
    listed = {line.split()[0]: line.split()[1] for line in lines[1:]}
    assert listed["greet"] == "plain" and listed["beat-report"] == "celery"
    assert listed["actor-refresh"] == "dramatiq"
