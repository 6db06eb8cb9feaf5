"""Prometheus metrics scraped over HTTP from real processes while jobs succeed, fail and
are skipped, counted against the store's history: the plain ``Scheduler(metrics=True)``
entry point and ``manage.py anarchon run --metrics-port``."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from anarchon import Scheduler, from_url
from tests.harness.examples import ROOT, example_env

HERE = Path(__file__).parent
Counts = dict[tuple[str, str, str], float]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def scrape(port: int) -> Counts:
    """``anarchon_runs_total`` and ``anarchon_slot_skips_total`` by (metric, job, label)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
        text = reply.read().decode()
    counts: Counts = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "anarchon_runs_total":
                counts[("runs", sample.labels["job"], sample.labels["outcome"])] = sample.value
            elif sample.name == "anarchon_slot_skips_total":
                counts[("skips", sample.labels["job"], sample.labels["reason"])] = sample.value
    return counts


def history(url: str) -> Counts:
    """The same counts from the store's history."""
    reader = Scheduler(from_url(url))
    counts: Counter[tuple[str, str, str]] = Counter()
    for name in ("ok", "boom", "slow"):
        for record in reader.history(name, 500):
            if record.status == "skipped":
                counts[("skips", name, record.reason)] += 1
            elif record.status in ("success", "failure"):
                counts[("runs", name, record.status)] += 1
    reader.close()
    return {key: float(value) for key, value in counts.items()}


def agree(port: int, url: str, proc: subprocess.Popen[str]) -> Counts:
    """Poll until a scrape equals history (read before and after it) with every kind of
    outcome seen twice: a failure, a success, an overlap skip."""
    wanted = [("runs", "ok", "success"), ("runs", "boom", "failure"),
              ("skips", "slow", "overlap")]
    deadline = time.monotonic() + 40
    last: tuple[Counts, Counts] = ({}, {})
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()[0]
        try:
            before, scraped, after = history(url), scrape(port), history(url)
        except OSError:  # the server is not up yet
            time.sleep(0.2)
            continue
        seen = {key: value for key, value in scraped.items() if value}
        last = (seen, before)
        if before == after == seen and all(seen.get(key, 0) >= 2 for key in wanted):
            return seen
        time.sleep(0.3)
    raise AssertionError(f"metrics never matched history: scraped {last[0]}, history {last[1]}")


def stop(proc: subprocess.Popen[str]) -> str:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        return proc.communicate(timeout=30)[0]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_plain_scheduler_serves_metrics_matching_history(tmp_path: Path) -> None:
    url, port = f"sqlite:///{tmp_path / 'jobs.db'}", free_port()
    proc = subprocess.Popen(
        [sys.executable, str(HERE / "metrics_program.py"), url], cwd=ROOT,
        env=example_env(ANARCHON_METRICS_PORT=str(port)), stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True)
    try:
        agree(port, url, proc)
    finally:
        output = stop(proc)
    assert proc.returncode == 0, output


def test_manage_py_anarchon_run_serves_metrics_matching_history(tmp_path: Path) -> None:
    pytest.importorskip("django")
    url, port = f"sqlite:///{tmp_path / 'jobs.db'}", free_port()
    env = example_env(DJANGO_SETTINGS_MODULE="tests.system.observability.django_settings",
                      ANARCHON_TEST_STORE=url)
    proc = subprocess.Popen(
        [sys.executable, "-m", "django", "anarchon", "run", "--metrics-port", str(port),
         "--stop-timeout", "2"], cwd=ROOT, env=env, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True)
    try:
        agree(port, url, proc)
    finally:
        output = stop(proc)
    assert proc.returncode == 0, output


def test_metrics_true_without_prometheus_client_names_the_extra(tmp_path: Path) -> None:
    program = ("import sys; sys.modules['prometheus_client'] = None\n"
               "from anarchon import Scheduler, from_url\n"
               f"Scheduler(from_url('sqlite:///{tmp_path / 'x.db'}'), metrics=True)\n")
    proc = subprocess.run([sys.executable, "-c", program], cwd=ROOT, env=example_env(),
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert "pip install 'anarchon[prometheus]'" in proc.stderr


def test_metrics_must_be_a_bool(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="metrics must be True or False"):
        Scheduler(from_url(f"sqlite:///{tmp_path / 'x.db'}"), metrics="yes")  # type: ignore[arg-type]
