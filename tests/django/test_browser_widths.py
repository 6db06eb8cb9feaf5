"""Every admin page fits 1,280 px with the longest realistic values (Debian's chromium
through Selenium): 200-character job names, 10 kB params, a Celery crontab entry that
restricts both day fields. Pause/Resume and the dynamic list's Delete link stay inside
the window, long values are cut short with their full text one click away, and a page
does not grow with the params (the list shows a bounded excerpt).

``ANARCHON_SCREENSHOTS=<dir>`` also saves each page there (light mode).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.test import override_settings

from anarchon.backends.base import JobSpec
from anarchon_django.control import controls, direct, runtime
from tests.django.support import wait_for
from tests.django.test_browser import browser  # noqa: F401  (fixture)

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

#: 200 characters, no space to break at (names rarely have one)
LONG_DYNAMIC = ("tenant-report-" + "abcdefghij" * 20)[:200]
LONG_CODE = ("nightly-export-" + "0123456789" * 20)[:200]
LONG_ENTRY = ("celery-entry-" + "klmnopqrst" * 20)[:200]
#: about 10 kB of params
PARAMS = {"recipients": [f"user-{n:04d}@example.com" for n in range(400)]}
#: a page may hold the params' excerpt, never the params
MAX_PAGE = 120_000


@pytest.fixture
def wide(tmp_path: Path) -> Iterator[None]:
    """The store with the longest values: a code job another instance registered, a
    dynamic job with 10 kB params, and Celery crontab entries."""
    from celery.schedules import crontab

    from anarchon_celery import Entry
    from tests.django.test_admin_celery import APP

    config = {**settings.ANARCHON, "BACKEND": "django",
              "CELERY_APP": "tests.django.test_admin_celery:APP"}
    with override_settings(ANARCHON=config):
        scheduler = runtime.get_scheduler()
        store = direct.store_of(scheduler)
        assert store is not None
        store.register([JobSpec(LONG_CODE, "cron", "cron '0 3 * * *' (America/New_York)")])
        store.offer_handlers("worker-1", ["report"])
        controls.add_job(LONG_DYNAMIC, "django:ops", handler="report", every="1h",
                         params=PARAMS)
        writer = controls.writer()
        Entry(APP, LONG_ENTRY, "proj.report",
              crontab(minute="0", hour="3", day_of_month="1-7", day_of_week="1")
              ).save(core=writer, by="django:ops")
        Entry(APP, "monthly-close", "proj.report",
              crontab(minute="30", hour="4", day_of_month="1")).save(core=writer, by="ops")
        controls.pause("greet", "django:ops")
        User.objects.create_superuser("wide", "w@example.com", "pw")
        yield


def _overflow(driver: Any) -> int:
    """How many px the page (or a table's scroll box) is wider than the window."""
    return int(driver.execute_script(
        "var boxes = [document.documentElement].concat("
        "  Array.from(document.querySelectorAll('.results, #content-main')));"
        "return Math.max.apply(null, boxes.map(e => e.scrollWidth - e.clientWidth))"))


def _outside(driver: Any, selector: str) -> list[str]:
    """The elements matching ``selector`` that end right of the window."""
    return list(driver.execute_script(
        "return Array.from(document.querySelectorAll(arguments[0]))"
        "  .filter(e => e.getBoundingClientRect().right > window.innerWidth)"
        "  .map(e => e.outerHTML.slice(0, 120))", selector))


def test_every_page_fits_1280px_with_the_longest_values(
        browser: Any, live_server: Any, wide: None, tmp_path: Path) -> None:  # noqa: F811
    from selenium.webdriver.common.by import By

    shots = [tmp_path] + ([Path(os.environ["ANARCHON_SCREENSHOTS"])]
                          if os.environ.get("ANARCHON_SCREENSHOTS") else [])
    browser.get(f"{live_server.url}/admin/login/?next=/admin/")
    browser.find_element(By.NAME, "username").send_keys("wide")
    browser.find_element(By.NAME, "password").send_keys("pw")
    browser.find_element(By.CSS_SELECTOR, "input[type=submit]").click()
    wait_for(lambda: "Anarchon" in browser.page_source, 10, "the admin index")
    base = f"{live_server.url}/admin/anarchon_django/"
    pages = {"jobs": "job/", "job-long": f"job/detail/?job={LONG_DYNAMIC}",
             "dynamic": "dynamicjob/", "dynamic-long": f"dynamicjob/change/?job={LONG_DYNAMIC}",
             "entry-long": f"dynamicjob/change/?job={LONG_ENTRY}", "history": "run/"}
    problems: list[str] = []
    for name, path in pages.items():
        browser.get(base + path)
        wait_for(lambda: "content-main" in browser.page_source, 10, name)
        for folder in shots:
            browser.save_screenshot(str(folder / f"django-admin-wide-{name}.png"))
        extra = _overflow(browser)
        if extra > 0:
            problems.append(f"{name}: {extra}px wider than 1280px")
        size = len(browser.page_source)
        if size > MAX_PAGE:
            problems.append(f"{name}: {size:,} characters of HTML")
        for selector in ("input[value='Pause']", "input[value='Resume']",
                         "input[value='Run now']", "a.deletelink", "input[value='Save']"):
            cut = _outside(browser, selector)
            if cut:
                problems.append(f"{name}: {selector} cut off: {cut[0]}")
    assert not problems, "\n".join(problems)

    # the full text one click away: the dynamic list's excerpt links to the job's form,
    # whose params field holds all of them
    browser.get(base + "dynamicjob/")
    row = browser.find_element(By.CSS_SELECTOR, f"tr.anarchon-dynamic[data-job='{LONG_DYNAMIC}']")
    excerpt = row.find_element(By.CSS_SELECTOR, "td.field-params a")
    assert len(excerpt.text) < 200 and excerpt.text.endswith("…")
    excerpt.click()
    wait_for(lambda: browser.find_elements(By.NAME, "params"), 10, "the job's form")
    full = browser.find_element(By.NAME, "params").get_attribute("value")
    assert json.loads(full) == PARAMS
    browser.get(base + "job/")
    link = browser.find_element(By.CSS_SELECTOR, f"tr[data-job='{LONG_CODE}'] th a")
    assert link.get_attribute("title") == LONG_CODE
    link.click()
    wait_for(lambda: LONG_CODE in browser.find_element(By.TAG_NAME, "h1").text, 10,
             "the job page with the full name")
