"""``manage.py anarchon run`` through a store outage (our own Redis stopped for a few
seconds while a job runs every second): the process logs one WARNING when the store
stops answering and one INFO when it answers again (the core's outage log), not a
WARNING with a traceback for each failed call, and runs the job again afterwards."""

from __future__ import annotations

import re
import time
import uuid
from pathlib import Path

import pytest

from tests.django.support import wait_for
from tests.django.test_cluster import HANDLER, Project
from tests.harness.servers import throwaway
from tests.system.faults.conftest import missing

pytestmark = pytest.mark.slow

#: how long the store is down: many heartbeats (0.3 s) and claims fail meanwhile
DOWN = 5.0
#: the core's outage log lines, which name the store ("store RedisBackend(…) not answering")
WARNED = re.compile(r"store .+ not answering")
HEALED = re.compile(r"store .+ answering again")


def test_an_outage_logs_one_warning_and_one_info(tmp_path: Path) -> None:
    try:
        store = throwaway("redis", tmp_path, "djo_" + uuid.uuid4().hex[:8])
    except FileNotFoundError as exc:
        missing(str(exc))
    project = Project({"ANARCHON_DJANGO_DB": "sqlite",
                       "ANARCHON_DJANGO_SQLITE": str(tmp_path / "p.db"),
                       "ANARCHON_TEST_BACKEND": store.url,
                       "ANARCHON_TEST_LOG_LEVEL": "INFO"}, tmp_path)
    output = tmp_path / "a.out"
    try:
        project.start(["a"], {"tick": {"callable": HANDLER, "every": "1s"}})
        wait_for(project.begins, 20, "a first run")
        store.down()
        time.sleep(DOWN)  # the outage itself: its length is the point, nothing to poll
        store.up()
        up = time.time()
        wait_for(lambda: [r for r in project.begins() if r["t"] > up], 20,
                 "a run after the store came up")
        wait_for(lambda: HEALED.search(output.read_text()) is not None, 10,
                 "the INFO that the store answers again")
    finally:
        codes = project.stop()
        store.close()
    text = output.read_text()
    lines = text.splitlines()
    warned = [line for line in lines if WARNED.search(line)]
    healed = [line for line in lines if HEALED.search(line)]
    assert len(warned) == 1 and len(healed) == 1, text[-4000:]
    counted = re.search(r"\((\d+) failed call", healed[0])
    assert counted is not None, healed
    failed_calls = int(counted.group(1))
    assert failed_calls >= 2, healed  # several calls failed: each was not a WARNING
    assert "Traceback" not in text, text[-4000:]
    assert not [line for line in lines if line.startswith("error ")], text[-4000:]
    assert codes == {"a": 0}, codes
    print(f"\nDJANGO-OUTAGE {DOWN:g}s: {failed_calls} failed calls, log lines: "
          f"{len(lines)} ({len(warned)} WARNING, {len(healed)} INFO)")
