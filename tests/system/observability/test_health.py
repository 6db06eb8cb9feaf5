"""``anarchon_instances_alive``, ``/healthz`` and the liveness file, from real processes
on stores this test starts (and kills): counts follow instances that start and stop,
health follows the store's answers to the heartbeat."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest
from prometheus_client.parser import text_string_to_metric_families

from anarchon import Scheduler, from_url
from tests.harness.examples import ROOT, example_env
from tests.harness.servers import Outage, throwaway
from tests.system.observability.test_metrics import free_port, stop

HERE = Path(__file__).parent
LEASE, HEARTBEAT = 2.0, 0.5
T = TypeVar("T")


def start(url: str, port: int, **env: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(HERE / "health_program.py"), url], cwd=ROOT,
        env=example_env(ANARCHON_METRICS_PORT=str(port), **env), stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True)


def get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as reply:
            return int(reply.status), reply.read().decode()
    except urllib.error.HTTPError as error:
        return int(error.code), error.read().decode()


def alive(port: int) -> float | None:
    """``anarchon_instances_alive`` as scraped (``None``: no sample)."""
    for family in text_string_to_metric_families(get(port, "/metrics")[1]):
        for sample in family.samples:
            if sample.name == "anarchon_instances_alive":
                return float(sample.value)
    return None


def until(probe: Callable[[], T], wanted: Callable[[T], bool], within: float,
          procs: list[subprocess.Popen[str]]) -> T:
    """Poll ``probe()`` until ``wanted`` holds (the programs still running)."""
    deadline = time.monotonic() + within
    last: T | None = None
    while time.monotonic() < deadline:
        for proc in procs:
            assert proc.poll() is None, proc.communicate()[0]
        try:
            last = probe()
        except OSError:  # the server is not up yet
            last = None
        else:
            if wanted(last):
                return last
        time.sleep(0.1)
    raise AssertionError(f"not reached within {within}s; last seen {last!r}")


@pytest.fixture
def redis_store(tmp_path: Path) -> Iterator[Outage]:
    try:
        store = throwaway("redis", tmp_path, "health", sigkill=True)
    except FileNotFoundError as exc:
        pytest.fail(f"no redis-server to start: {exc}")
    try:
        yield store
    finally:
        store.close()


@pytest.mark.parametrize("kind", ["redis", "sqlite"])
def test_instances_alive_counts_live_instances(kind: str, tmp_path: Path,
                                               request: pytest.FixtureRequest) -> None:
    url = (request.getfixturevalue("redis_store").url if kind == "redis"
           else f"sqlite:///{tmp_path / 'jobs.db'}")
    ports = [free_port(), free_port()]
    procs = [start(url, port) for port in ports]
    try:
        for port in ports:
            until(functools.partial(alive, port), lambda n: n == 2, 30, procs)
        stop(procs[1])
        # stop() removes the record; the scrape reads again after one heartbeat
        until(lambda: alive(ports[0]), lambda n: n == 1, HEARTBEAT + 5, procs[:1])
    finally:
        outputs = [stop(proc) for proc in procs]
    assert procs[0].returncode == 0, outputs[0]


def test_healthz_and_liveness_file_follow_the_store(redis_store: Outage,
                                                     tmp_path: Path) -> None:
    url = redis_store.url
    port, beacon = free_port(), tmp_path / "alive"
    proc = start(url, port, ANARCHON_LIVENESS_FILE=str(beacon))

    def age() -> float:
        return time.time() - os.stat(beacon).st_mtime

    try:
        _, text = until(lambda: get(port, "/healthz"), lambda r: r[0] == 200, 30,
                             [proc])
        assert "heartbeat confirmed" in text and text.count("\n") == 1
        # touched at every confirmed beat: never older than a heartbeat (+ scheduling)
        until(age, lambda a: a < HEARTBEAT + 0.5, 5, [proc])
        redis_store.down()  # kill -9 of the store
        killed = time.monotonic()
        _, text = until(lambda: get(port, "/healthz"), lambda r: r[0] == 503,
                             LEASE + HEARTBEAT + 3, [proc])
        assert time.monotonic() - killed >= LEASE - HEARTBEAT, text
        assert "heartbeat" in text and f"lease ({LEASE:g}s)" in text, text
        assert text.count("\n") == 1, text
        assert age() > LEASE - HEARTBEAT  # an exec probe comparing it to the lease fails
        stale = os.stat(beacon).st_mtime
        time.sleep(HEARTBEAT * 2)
        assert os.stat(beacon).st_mtime == stale  # no beat confirmed: not touched
        redis_store.up()
        until(lambda: get(port, "/healthz"), lambda r: r[0] == 200, 15, [proc])
        until(age, lambda a: a < HEARTBEAT + 0.5, 5, [proc])
    finally:
        output = stop(proc)
    assert proc.returncode == 0, output


def test_healthz_503_when_no_scheduler_runs(tmp_path: Path) -> None:
    port = free_port()
    program = ("from anarchon.observability import serve_metrics\n"
               "from anarchon import Scheduler, from_url\n"
               f"Scheduler(from_url('sqlite:///{tmp_path / 'x.db'}'), metrics=True)\n"
               f"serve_metrics({port}); print('up', flush=True); input()\n")
    proc = subprocess.Popen([sys.executable, "-c", program], cwd=ROOT, env=example_env(),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        status, text = until(lambda: get(port, "/healthz"), lambda r: r[0] != 0, 30, [proc])
        assert (status, text) == (503, "no anarchon scheduler is running in this process\n")
    finally:
        proc.kill()
        proc.communicate()


def test_liveness_file_must_be_a_path(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="liveness_file must be a path, got 3"):
        Scheduler(from_url(f"sqlite:///{tmp_path / 'x.db'}"),
                  liveness_file=3)  # type: ignore[arg-type]
