"""A real browser (Debian's chromium + chromedriver through Selenium) against
``live_server``: log in, open the history, filter to failures, open a failure, press
"Run now" and see the manual run appear once a running instance has executed it.

Set ``ANARCHON_SCREENSHOTS=<dir>`` to also save the history, detail and jobs pages
there, in light and dark mode, at 1280 px (``docs/`` holds the committed ones).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import Permission, User
from django.test import override_settings

from anarchon import Scheduler
from anarchon_django.control import runtime
from tests.django.support import wait_for
from tests.stores import in_ci

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
HANDLERS = "tests.django.testapp.handlers"


def _browser_missing() -> str | None:
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install selenium)"
    for path in (CHROMIUM, CHROMEDRIVER):
        if not os.path.exists(path):
            return f"{path} is missing (apt-get install -y chromium chromium-driver)"
    return None


@pytest.fixture
def browser() -> Iterator[Any]:
    reason = _browser_missing()
    if reason is not None:
        if in_ci():
            pytest.fail(f"CI needs the browser: {reason}", pytrace=False)
        pytest.skip(reason)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                     "--window-size=1280,1000", "--force-device-scale-factor=1"):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    driver.implicitly_wait(5)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture
def cluster(table: str) -> Iterator[list[Scheduler]]:
    """Three running instances with a fast job and a failing one."""
    jobs = {
        "tick": {"callable": f"{HANDLERS}.record", "every": "1s", "data": {"duration": 0.3}},
        "flaky": {"callable": f"{HANDLERS}.fail", "every": "2s"},
    }
    with override_settings(ANARCHON={**settings.ANARCHON, "JOBS": jobs}):
        schedulers = [runtime.build_scheduler(instance_id=name)
                      for name in ("web-1", "web-2", "worker-1")]
        for scheduler in schedulers:
            scheduler.start()
        try:
            yield schedulers
        finally:
            for scheduler in schedulers:
                scheduler.stop(5)


def _shoot(browser: Any, folders: list[Path], name: str) -> None:
    """Screenshots of the page in light and dark mode; the page must fit 1280 px."""
    overflow = browser.execute_script(
        "var boxes = [document.documentElement].concat("
        "  Array.from(document.querySelectorAll('#changelist .results')));"
        "return Math.max.apply(null, boxes.map(e => e.scrollWidth - e.clientWidth))")
    columns = browser.execute_script(
        "return Array.from(document.querySelectorAll('#result_list thead th')).map("
        "e => e.textContent.trim() + '=' + e.offsetWidth).join(' ')")
    assert overflow <= 0, f"{name} needs {overflow}px more than 1280px give: {columns}"
    for scheme in ("light", "dark"):
        browser.execute_cdp_cmd("Emulation.setEmulatedMedia", {
            "features": [{"name": "prefers-color-scheme", "value": scheme}]})
        if scheme == "dark":
            background = browser.execute_script(
                "var svg = document.querySelector('svg.anarchon-timeline');"
                "return svg ? getComputedStyle(svg).backgroundColor : null")
            assert background in (None, "rgba(0, 0, 0, 0)") or not background.startswith(
                "rgb(255, 255, 255"), f"the timeline stays white in dark mode: {background}"
        for folder in folders:
            browser.save_screenshot(str(folder / f"{name}-{scheme}.png"))
    browser.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": []})


def _runner() -> User:
    user: User = User.objects.create_user("runner", password="pw", is_staff=True)
    for codename in ("view_run", "view_job", "run_job"):
        user.user_permissions.add(Permission.objects.get(
            content_type__app_label="anarchon_django", codename=codename))
    return user


def test_history_filter_detail_and_run_now_in_a_real_browser(
        browser: Any, live_server: Any, cluster: list[Scheduler], tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    _runner()
    shared = runtime.get_scheduler()
    wait_for(lambda: len(shared.history("tick", 50)) >= 8
             and len([r for r in shared.history("flaky", 10) if r.status == "failure"]) >= 3,
             30, "the cluster to build some history")
    shots = [tmp_path] + ([Path(os.environ["ANARCHON_SCREENSHOTS"])]
                          if os.environ.get("ANARCHON_SCREENSHOTS") else [])

    browser.get(f"{live_server.url}/admin/login/?next=/admin/")
    browser.find_element(By.NAME, "username").send_keys("runner")
    browser.find_element(By.NAME, "password").send_keys("pw")
    browser.find_element(By.CSS_SELECTOR, "input[type=submit]").click()
    wait_for(lambda: "Anarchon" in browser.page_source, 10, "the admin index")

    browser.find_element(By.LINK_TEXT, "Run history").click()
    wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, "tr.anarchon-row"), 10, "rows")
    _shoot(browser, shots, "django-admin-history")

    browser.find_element(By.CSS_SELECTOR, "#filter-status").find_element(
        By.LINK_TEXT, "failure").click()
    wait_for(lambda: "status=failure" in browser.current_url, 10, "the failure filter")
    rows = browser.find_elements(By.CSS_SELECTOR, "tr.anarchon-row")
    assert rows and {row.get_attribute("data-status") for row in rows} == {"failure"}

    rows[0].find_element(By.CSS_SELECTOR, "th a").click()
    wait_for(lambda: "anarchon-detail" in browser.page_source, 10, "the detail page")
    assert "ValueError: settings job failed on purpose" in browser.find_element(
        By.CSS_SELECTOR, "pre.anarchon-error").text
    _shoot(browser, shots, "django-admin-detail")

    browser.get(f"{live_server.url}/admin/anarchon_django/job/")
    assert browser.find_elements(By.CSS_SELECTOR, "svg.anarchon-timeline rect.run")
    _shoot(browser, shots, "django-admin-jobs")
    browser.find_element(By.CSS_SELECTOR, "input[value='Run now'][data-job='greet']").click()
    message = browser.find_element(By.CSS_SELECTOR, "ul.messagelist li.success").text
    assert "Requested a manual run" in message

    def manual_run_listed() -> bool:
        browser.get(f"{live_server.url}/admin/anarchon_django/run/?job=greet&reason=manual")
        return bool(browser.find_elements(By.CSS_SELECTOR, "tr.anarchon-row[data-job='greet']"))

    wait_for(manual_run_listed, 15, "the manual run in the history", step=0.5)
    (record,) = shared.history("greet", 5)
    assert record.manual and record.status == "success"
    assert record.instance_id in ("web-1", "web-2", "worker-1")


def _login(browser: Any, live_server: Any, username: str) -> None:
    from selenium.webdriver.common.by import By

    browser.get(f"{live_server.url}/admin/login/?next=/admin/")
    browser.find_element(By.NAME, "username").send_keys(username)
    browser.find_element(By.NAME, "password").send_keys("pw")
    browser.find_element(By.CSS_SELECTOR, "input[type=submit]").click()
    wait_for(lambda: "Anarchon" in browser.page_source, 10, "the admin index")


def test_pause_resume_reschedule_and_a_dynamic_job_in_a_real_browser(
        browser: Any, live_server: Any, core: Scheduler, worker: Scheduler,
        tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    user: User = User.objects.create_user("operator", password="pw", is_staff=True)
    for codename in ("view_run", "view_job", "run_job", "change_job", "view_dynamicjob",
                     "add_dynamicjob", "change_dynamicjob", "delete_dynamicjob"):
        user.user_permissions.add(Permission.objects.get(
            content_type__app_label="anarchon_django", codename=codename))
    wait_for(lambda: any("report" in names for names in core.offered_handlers().values()),
             10, "the worker's handler offer")
    core.reschedule("count-users", every="30m", by="ops-script")
    shots = [tmp_path] + ([Path(os.environ["ANARCHON_SCREENSHOTS"])]
                          if os.environ.get("ANARCHON_SCREENSHOTS") else [])
    _login(browser, live_server, "operator")

    browser.get(f"{live_server.url}/admin/anarchon_django/job/")
    browser.find_element(By.CSS_SELECTOR, "input[value='Pause'][data-job='greet']").click()
    message = browser.find_element(By.CSS_SELECTOR, "ul.messagelist li.success").text
    assert message.startswith("Paused “greet”")
    row = browser.find_element(By.CSS_SELECTOR, "tr.anarchon-job[data-job='greet']")
    assert row.get_attribute("data-paused") == "1" and "paused" in row.text
    assert browser.find_elements(By.CSS_SELECTOR, "input[value='Resume'][data-job='greet']")
    greet = next(info for info in core.jobs() if info.name == "greet")
    assert greet.paused and core.changes("greet")[0].by == "django:operator"
    _shoot(browser, shots, "django-admin-jobs-control")

    browser.find_element(By.CSS_SELECTOR, "tr.anarchon-job[data-job='greet'] th a").click()
    wait_for(lambda: browser.find_elements(By.ID, "anarchon-schedule-form"), 10, "job page")
    browser.find_element(By.CSS_SELECTOR, "input[name='kind'][value='cron']").click()
    browser.find_element(By.NAME, "cron").send_keys("0 7 * * 1-5")
    browser.find_element(By.NAME, "timezone").clear()
    browser.find_element(By.NAME, "timezone").send_keys("Europe/Berlin")
    browser.find_element(By.CSS_SELECTOR, "input[value='Save schedule']").click()
    message = browser.find_element(By.CSS_SELECTOR, "ul.messagelist li.success").text
    assert "Rescheduled “greet” to cron 0 7 * * 1-5 (Europe/Berlin)" in message
    facts = browser.find_element(By.ID, "anarchon-job")
    assert facts.get_attribute("data-source") == "override"
    assert [e.get_attribute("data-action") for e in browser.find_elements(
        By.CSS_SELECTOR, "tr.anarchon-change")] == ["reschedule", "pause"]
    _shoot_form(browser, shots, "django-admin-job-control")
    browser.find_element(By.CSS_SELECTOR, "input[value='Resume'][data-job='greet']").click()
    wait_for(lambda: "Resumed “greet”" in browser.page_source, 10, "the Resume message")
    assert browser.find_element(By.ID, "anarchon-job").get_attribute("data-paused") == "0"

    browser.get(f"{live_server.url}/admin/anarchon_django/dynamicjob/add/")
    browser.find_element(By.NAME, "name").send_keys("mail-digest")
    Select(browser.find_element(By.NAME, "handler")).select_by_value("report")
    browser.find_element(By.NAME, "every").send_keys("15m")
    browser.find_element(By.NAME, "params").send_keys('{"to": oops}')
    browser.find_element(By.CSS_SELECTOR, "input[value='Save']").click()
    assert "Enter a valid JSON" in browser.find_element(By.CSS_SELECTOR,
                                                        ".field-params ul.errorlist").text
    _shoot_form(browser, shots, "django-admin-dynamic-error")
    browser.find_element(By.NAME, "params").clear()
    browser.find_element(By.NAME, "params").send_keys('{"to": "ops@example.com"}')
    browser.find_element(By.CSS_SELECTOR, "input[value='Save']").click()
    assert "Added dynamic job “mail-digest”" in browser.find_element(
        By.CSS_SELECTOR, "ul.messagelist li.success").text
    row = browser.find_element(By.CSS_SELECTOR, "tr.anarchon-dynamic[data-job='mail-digest']")
    assert "worker-1" in row.text and "every 900s" in row.text
    _shoot(browser, shots, "django-admin-dynamic")


def _shoot_form(browser: Any, folders: list[Path], name: str) -> None:
    """A form page in light and dark mode, the whole page tall."""
    height = browser.execute_script("return document.documentElement.scrollHeight")
    browser.set_window_size(1280, max(1000, min(int(height) + 200, 2600)))
    try:
        _shoot(browser, folders, name)
    finally:
        browser.set_window_size(1280, 1000)
