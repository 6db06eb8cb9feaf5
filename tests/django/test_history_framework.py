"""The run history shows each attempt's framework (issue 17): a *Framework* column on the
history page and a *Framework:* row on the attempt's page, with the label the Jobs page
shows (``anarchon.backends.frameworks.shown``), taken from the known jobs' registrations
once per page load — on the ``"django"`` store (the database pages the history) and on
another backend (the core's history)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from django.conf import settings
from django.test import Client, override_settings

from anarchon import JobInfo, RunContext, Scheduler
from anarchon_django.control import runtime
from tests.django.control_support import staff  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)

HISTORY = "/admin/anarchon_django/run/"
HEADER = '<th scope="col"><div class="text"><span>Framework</span></div></th>'


def _report(ctx: RunContext) -> None:
    """What a beat entry's publisher does here: nothing to see."""


@pytest.fixture(params=["django", "sqlite"])
def history(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A store with a run of a Celery-marked job (``beat-report``, declared as
    ``anarchon_celery`` declares beat entries, by a process that has stopped since) and
    of a plain job (``greet``, the test project's); yields the backend's kind."""
    if request.param == "django":
        request.getfixturevalue("table")  # this test's copy of ANARCHON
        backend = settings.ANARCHON["BACKEND"]
    else:
        backend = f"sqlite:///{tmp_path}/other.db"
    with override_settings(ANARCHON={**settings.ANARCHON, "BACKEND": backend}):
        runtime.reset()
        beat: Scheduler = runtime.build_scheduler([], instance_id="beat-1")
        beat.declare_job("every", "beat-report", 3600.0, _report, {}, framework="celery")
        beat.start()  # registers beat-report, marked celery, in the store
        try:
            beat.run_now("beat-report")
        finally:
            beat.stop(5)
        seed = runtime.build_scheduler(instance_id="seed-1")
        seed.run_now("greet")
        seed.close()
        runtime.reset()
        yield request.param
    runtime.reset()


def _frameworks(page: str) -> dict[str, str]:
    """Job name -> the framework of its rows on the history page (one per job)."""
    found: dict[str, set[str]] = {}
    for job, framework in re.findall(r'<tr class="anarchon-row" data-job="([^"]+)"[^>]*'
                                     r'data-framework="([^"]*)"', page):
        found.setdefault(job, set()).add(framework)
    assert all(len(labels) == 1 for labels in found.values()), found
    return {job: labels.pop() for job, labels in found.items()}


def _detail(client: Client, page: str, job: str) -> str:
    """The attempt page the first history row of ``job`` links to."""
    link = re.search(r'data-job="' + re.escape(job) + r'"[^>]*>\s*<th class="field-job">'
                     r'<a href="([^"]+)"', page)
    assert link is not None, f"no row of {job}"
    response = client.get(link.group(1).replace("&amp;", "&"))
    assert response.status_code == 200
    return str(response.content.decode())


def test_history_and_detail_show_each_jobs_framework(
        history: str, staff: Callable[..., Client],  # noqa: F811
        monkeypatch: pytest.MonkeyPatch) -> None:
    reads: list[int] = []
    job_infos = runtime.job_infos

    def counted(scheduler: Scheduler | None = None) -> list[JobInfo]:
        reads.append(1)
        return job_infos(scheduler)

    monkeypatch.setattr(runtime, "job_infos", counted)
    client = staff("view_run", "view_job")
    response = client.get(HISTORY)
    assert response.status_code == 200
    page = response.content.decode()
    assert "did not answer" not in page
    assert page.count(HEADER) == 1
    headers = re.findall(r'<th scope="col"[^>]*><div class="text">(?:<a [^>]*>|<span>)'
                         r'([^<]+)<', page)
    assert headers[:3] == ["Job", "Framework", "Slot"], headers

    rows = _frameworks(page)
    assert rows["beat-report"] == "celery" and rows["greet"] == "plain", rows
    assert ('<td class="field-framework"><span class="anarchon-framework '
            'anarchon-framework-celery">celery</span></td>') in page
    assert ('<td class="field-framework"><span class="anarchon-framework '
            'anarchon-framework-plain">plain</span></td>') in page
    # the known jobs are read once for the whole page, never per row (on another backend
    # the core's history reads the job names once more, to read each job's history)
    assert len(reads) == (1 if history == "django" else 2), reads

    # the same labels as the Jobs page
    jobs = client.get("/admin/anarchon_django/job/").content.decode()
    assert re.search(r'data-job="beat-report"[^>]*data-framework="celery"', jobs)
    assert re.search(r'data-job="greet"[^>]*data-framework="plain"', jobs)

    reads.clear()
    celery_run = _detail(client, page, "beat-report")
    assert ('<label>Framework:</label><div class="readonly" id="anarchon-run-framework">'
            '<span class="anarchon-framework anarchon-framework-celery">celery</span>'
            ) in celery_run
    assert len(reads) == 1, reads
    plain_run = _detail(client, page, "greet")
    assert ('id="anarchon-run-framework"><span class="anarchon-framework '
            'anarchon-framework-plain">plain</span>') in plain_run


def test_a_job_no_longer_known_shows_no_framework(
        table: str, staff: Callable[..., Client]) -> None:  # noqa: F811
    runtime.reset()
    scheduler = runtime.build_scheduler([], instance_id="old-1")
    scheduler.declare_job("every", "old-job", 3600.0, _report, {}, framework="celery")
    scheduler.run_now("old-job")  # never started: never registered in the store
    scheduler.close()
    runtime.reset()
    try:
        client = staff("view_run")
        page = client.get(HISTORY).content.decode()
        assert _frameworks(page) == {"old-job": ""}
        assert '<td class="field-framework"><span class="anarchon-note"' in page
        detail = _detail(client, page, "old-job")
        assert re.search(r'id="anarchon-run-framework"><span class="anarchon-note"[^>]*>—',
                         detail)
    finally:
        runtime.reset()
