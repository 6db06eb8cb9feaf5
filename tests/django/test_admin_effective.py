"""The Jobs page and ``manage.py anarchon list`` show each job's effective definition
(schedule, source, time zone) as the instances run it: a code job rescheduled to
another zone, a cron job another instance registered in its own zone, a dynamic job
in a zone of its own. In a ``TestCase`` on the ``"django"`` store."""

from __future__ import annotations

import re
from collections.abc import Callable
from io import StringIO

import pytest
from django.conf import settings
from django.core.management import call_command
from django.test import Client, override_settings

from anarchon.backends.base import JobSpec
from anarchon_django.control import controls, direct, runtime

pytestmark = pytest.mark.django_db

JOBS = "/admin/anarchon_django/job/"


def zone_cell(page: str, job: str) -> str:
    """The Timezone cell (after Framework and Schedule) of ``job``'s row on the Jobs page."""
    row = re.search(rf'<tr class="anarchon-job[^"]*" data-job="{re.escape(job)}".*?</tr>',
                    page, re.S)
    assert row is not None, f"no row for {job}"
    cells = re.findall(r"<td[^>]*>(.*?)</td>", row.group(0), re.S)
    return re.sub(r"<[^>]+>", "", cells[2]).strip()


def listed(job: str) -> str:
    out = StringIO()
    call_command("anarchon", "list", stdout=out)
    return next(line for line in out.getvalue().splitlines() if line.split()[0] == job)


def test_every_zone_is_the_effective_one(staff: Callable[..., Client]) -> None:
    with override_settings(ANARCHON={**settings.ANARCHON, "BACKEND": "django"}):
        store = direct.store_of(runtime.get_scheduler())
        assert store is not None
        controls.reschedule("nightly-fail", "django:ops", cron="0 3 * * *",
                            timezone="Asia/Tokyo")
        store.register([JobSpec("ny-report", "cron",
                                "cron '0 9 * * 1-5' (America/New_York)")])
        store.offer_handlers("worker-1", ["report"])
        controls.add_job("kolkata-digest", "django:ops", handler="report",
                         cron="30 8 * * *", timezone="Asia/Kolkata")
        page = staff("view_job").get(JOBS).content.decode()
        assert zone_cell(page, "nightly-fail") == "Asia/Tokyo"
        assert zone_cell(page, "ny-report") == "America/New_York"
        assert zone_cell(page, "kolkata-digest") == "Asia/Kolkata"
        assert zone_cell(page, "greet") == "—"  # an interval has no zone

        line = listed("nightly-fail")
        assert "cron 0 3 * * * (Asia/Tokyo)" in line and " override " in line
        assert "Asia/Tokyo" in line.split("(Asia/Tokyo)")[1], line
        assert "Europe/Berlin" not in line
        line = listed("ny-report")
        assert "America/New_York" in line.split("(America/New_York)")[1] and " code " in line
        line = listed("kolkata-digest")
        assert "Asia/Kolkata" in line.split("(Asia/Kolkata)")[1] and " dynamic " in line

        controls.pause("kolkata-digest", "django:ops")
        assert "dynamic (paused)" in listed("kolkata-digest")
        controls.reschedule("nightly-fail", "django:ops", reset=True)
        assert "Europe/Berlin" in listed("nightly-fail")
        page = staff("view_job", name="second").get(JOBS).content.decode()
        assert zone_cell(page, "nightly-fail") == "Europe/Berlin"
