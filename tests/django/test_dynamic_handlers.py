"""A plain Django project offers handlers for dynamic jobs with ``@anarchon_django.handler``
(in an app's module, autodiscovered: ``testapp/dynamic_handlers.py``): a real
``manage.py anarchon run`` offers ``testapp-report``, the admin's form lists it, a
dynamic job added there runs on that process, and the Jobs page never calls it gone;
after a restart of the process it runs again, and deleted and added again it runs
again. On the suite's database (the test database, shared with the process)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db import connections
from django.test import Client

from anarchon_django.control import controls, runtime
from tests.django.support import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True),
              pytest.mark.timeout(180)]

ROOT = Path(__file__).resolve().parents[2]
DYNAMIC = "/admin/anarchon_django/dynamicjob/"
JOBS = "/admin/anarchon_django/job/"
ALL = ("view_job", "change_job", "run_job", "view_dynamicjob", "add_dynamicjob",
       "change_dynamicjob", "delete_dynamicjob")


class Instance:
    """``manage.py anarchon run`` on the test's database, logging runs to a file."""

    def __init__(self, tmp: Path) -> None:
        settings_dict = connections["default"].settings_dict
        database = {"sqlite": {"ANARCHON_DJANGO_SQLITE": str(settings_dict["NAME"])},
                    "postgresql": {"ANARCHON_DJANGO_PG": str(settings_dict["NAME"])},
                    "mysql": {"ANARCHON_DJANGO_MARIADB": str(settings_dict["NAME"])},
                    }[connections["default"].vendor]
        self.log = tmp / "runs.jsonl"
        self.out = tmp / "instance.out"
        self.env = {**os.environ, "PYTHONPATH": str(ROOT), "ANARCHON_TEST_LOG": str(self.log),
                    "DJANGO_SETTINGS_MODULE": "tests.django.settings",
                    "ANARCHON_TEST_SCHEDULER": json.dumps({"lease": 2, "heartbeat": 0.3}),
                    "ANARCHON_TEST_AUTODISCOVER": json.dumps(["jobs", "dynamic_handlers"]),
                    **database}
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        before = self.out.read_text() if self.out.exists() else ""
        with self.out.open("ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "tests.django.manage", "anarchon", "run",
                 "--stop-timeout", "5"], cwd=ROOT, env=self.env, stdout=out,
                stderr=subprocess.STDOUT)
        wait_for(lambda: self.out.read_text().count(" running ") > before.count(" running "),
                 60, "the instance to start")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def runs(self, job: str) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        return [entry for entry in map(json.loads, self.log.read_text().splitlines())
                if entry.get("kind") == "dynamic" and entry.get("job") == job]


@pytest.fixture
def instance(tmp_path: Path) -> Iterator[Instance]:
    made = Instance(tmp_path)
    made.start()
    try:
        yield made
    finally:
        made.stop()
        print(made.out.read_text()[-3000:])


def _offered() -> bool:
    return "testapp-report" in controls.handler_names()


def _row(page: str, job: str) -> str:
    start = page.index(f'data-job="{job}"')
    return page[start:page.index("</tr>", start)]


def test_a_handler_of_the_project_runs_the_dynamic_jobs_the_admin_adds(
        staff: Callable[..., Client], instance: Instance) -> None:
    wait_for(_offered, 30, "the instance's handler offer")
    client = staff(*ALL, name="ops")
    assert b'<option value="testapp-report">' in client.get(DYNAMIC + "add/").content
    job = {"name": "tenant-report", "handler": "testapp-report", "kind": "every",
           "every": "1s", "params": '{"tenant": 7}', "enabled": "on"}
    response = client.post(DYNAMIC + "add/", job)
    assert response.status_code == 302, response.content.decode()[:3000]
    first = wait_for(lambda: instance.runs("tenant-report"), 30, "a run of the dynamic job")
    assert first[0]["params"] == {"tenant": 7}

    def shown_alive() -> bool:
        row = _row(client.get(JOBS).content.decode(), "tenant-report")
        return "anarchon-gone" not in row and 'value="Run now"' in row \
            and 'value="Pause"' in row
    assert shown_alive()
    info = controls.find("tenant-report")
    assert info is not None and not runtime.gone_jobs([info])

    # every process restarts: the stored job runs again on the new one
    instance.stop()
    seen = len(instance.runs("tenant-report"))
    instance.start()
    wait_for(lambda: len(instance.runs("tenant-report")) > seen, 30, "a run after restart")
    assert shown_alive()

    # deleted and added again: it stops, then runs again
    response = client.post(DYNAMIC + "delete/?job=tenant-report")
    assert response.status_code == 302
    assert "tenant-report" not in {i.name for i in controls.dynamic_jobs()}
    response = client.post(DYNAMIC + "add/", {**job, "params": '{"tenant": 8}'})
    assert response.status_code == 302
    wait_for(lambda: any(r["params"] == {"tenant": 8} for r in instance.runs("tenant-report")),
             30, "a run of the job added again")
    assert shown_alive()
