"""Metrics scraped over HTTP against history where other instances are involved: the
takeovers of a survivor after ``kill -9`` of the instance holding a run, and the runs of
``celery beat -S anarchon_celery:Scheduler`` served on a metrics port."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from anarchon import Scheduler, from_url
from tests.harness.celery.cluster import CeleryCluster, broker_available
from tests.harness.celery.fixtures import _plain_celery_project, _remove_broker_keys
from tests.harness.examples import ROOT, example_env
from tests.system.celery.test_beats import require
from tests.system.observability.test_health import get
from tests.system.observability.test_metrics import free_port, stop

HERE = Path(__file__).parent
#: seconds from now to the one-off slot: both programs are up and claim it
LEAD = 8
__all__ = ["_plain_celery_project", "_remove_broker_keys"]


def samples(port: int, name: str, label: str) -> dict[tuple[str, str], float]:
    """The samples of ``name`` by (job, ``label``)."""
    found = {}
    for family in text_string_to_metric_families(get(port, "/metrics")[1]):
        for sample in family.samples:
            if sample.name == name:
                found[(sample.labels["job"], sample.labels.get(label, ""))] = sample.value
    return found


def agree(scraped: Callable[[], float], recorded: Callable[[], float], within: float,
          alive: list[subprocess.Popen[str]] | None = None) -> float:
    """Poll until a scrape equals history read before and after it, and is at least 1."""
    deadline = time.monotonic() + within
    last: tuple[float, float] | None = None
    while time.monotonic() < deadline:
        for proc in alive or []:
            assert proc.poll() is None, proc.communicate()[0]
        try:
            before, value, after = recorded(), scraped(), recorded()
        except OSError:  # not serving yet
            time.sleep(0.2)
            continue
        last = (value, before)
        if before == value == after >= 1:
            return value
        time.sleep(0.2)
    raise AssertionError(f"metrics never matched history: scraped, history = {last}")


def test_takeovers_total_after_kill_9_of_the_runner(tmp_path: Path) -> None:
    url, markers = f"sqlite:///{tmp_path / 'jobs.db'}", tmp_path / "markers"
    markers.mkdir()
    ports, when = [free_port(), free_port()], str(int(time.time() + LEAD) + 1)
    procs = [subprocess.Popen(
        [sys.executable, str(HERE / "takeover_program.py"), url, when], cwd=ROOT,
        env=example_env(ANARCHON_METRICS_PORT=str(port), MARKERS=str(markers)),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for port in ports]
    try:
        deadline = time.monotonic() + LEAD + 15
        while not list(markers.iterdir()):  # one of them runs "hold", the other watches
            assert time.monotonic() < deadline, "no run of hold started"
            time.sleep(0.1)
        runner = int(next(markers.iterdir()).name)
        index = [p.pid for p in procs].index(runner)
        survivor, port = procs[1 - index], ports[1 - index]
        procs[index].kill()  # kill -9 while it holds the run
        procs[index].wait()
        (markers / str(runner)).unlink()

        def took_over() -> float:
            reader = Scheduler(from_url(url))
            try:
                return float(sum(1 for r in reader.history("hold", 200)
                                 if r.reason == "takeover"
                                 and f":{survivor.pid}:" in r.instance_id))
            finally:
                reader.close()

        value = agree(lambda: samples(port, "anarchon_takeovers_total", "").get(
            ("hold", ""), 0.0), took_over, 30, [survivor])
        assert value == 1.0
        assert (markers / str(survivor.pid)).exists()  # it runs the run it took over
    finally:
        outputs = [stop(proc) for proc in procs]
    assert survivor.returncode == 0, outputs[1 - index]


def test_celery_beat_serves_runs_matching_history(tmp_path: Path) -> None:
    require("the Redis broker", broker_available())
    url, port = f"sqlite:///{tmp_path / 'jobs.db'}", free_port()
    cluster = CeleryCluster(tmp_path, {
        "queue": "obs_" + uuid.uuid4().hex[:10], "backend": url, "metrics": True,
        "entries": {"tick": {"task": "t.noop", "every": 1}}})
    beat = cluster.beat("beat", env={"ANARCHON_METRICS_PORT": str(port)})

    def published() -> float:
        reader = Scheduler(from_url(url))
        try:
            return float(sum(1 for r in reader.history("tick", 200)
                             if r.status == "success"))
        finally:
            reader.close()

    try:
        assert agree(lambda: samples(port, "anarchon_runs_total", "outcome").get(
            ("tick", "success"), 0.0), published, 40) >= 1
        assert beat.poll() is None, cluster.output("beat")
    finally:
        cluster.stop_all()
