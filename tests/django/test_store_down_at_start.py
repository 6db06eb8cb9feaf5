"""``manage.py anarchon run`` started while its store (our own Redis, with a password) is
down: it keeps waiting (one WARNING naming the store, no password) and runs the job once
the store is up. Measured: store up -> first run."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest

from tests.django.support import wait_for
from tests.django.test_cluster import HANDLER, Project
from tests.harness.servers import throwaway
from tests.system.faults.conftest import missing

pytestmark = pytest.mark.slow

PASSWORD = "django-s3cret"
DOWN = 4.0
FIRST_RUN = 15.0


def test_anarchon_run_waits_for_a_store_that_is_down_at_start(tmp_path: Path) -> None:
    try:
        store = throwaway("redis", tmp_path, "dj_" + uuid.uuid4().hex[:8],
                          password=PASSWORD, start=False)
    except FileNotFoundError as exc:
        missing(str(exc))
    project = Project({"ANARCHON_DJANGO_DB": "sqlite",
                       "ANARCHON_DJANGO_SQLITE": str(tmp_path / "p.db"),
                       "ANARCHON_TEST_BACKEND": store.url}, tmp_path)
    output = tmp_path / "a.out"
    try:
        project.start(["a"], {"tick": {"callable": HANDLER, "every": "1s"}})
        wait_for(lambda: "does not answer" in output.read_text(), 20, "the store warning")
        time.sleep(DOWN)
        assert project.procs["a"].poll() is None, output.read_text()[-2000:]
        store.up()
        up = time.time()
        begins = wait_for(lambda: [r for r in project.begins() if r["t"] > up], FIRST_RUN,
                          "a run after the store came up")
        after_up = round(begins[0]["t"] - up, 2)
        print(f"\nDJANGO-DOWN-AT-START first run {after_up}s after the store came up")
        text = output.read_text()
        warned = [line for line in text.splitlines() if "does not answer" in line]
        assert warned and all("1 attempt(s)" in line for line in warned), warned
        assert PASSWORD not in text
    finally:
        codes = project.stop()
        store.close()
    assert codes == {"a": 0}, codes
