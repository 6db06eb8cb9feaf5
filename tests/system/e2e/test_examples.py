"""Every file in ``examples/`` runs, as documented at its top, against the rig's servers.

Each test starts the example as a real process (two copies where the example is about
several instances), lets it run for a few seconds (``--seconds``) and checks a line of
output that shows the example's point.
"""

from __future__ import annotations

import json
import re
import signal
import sqlite3
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.harness.examples import (
    EXAMPLES,
    ROOT,
    Example,
    example_env,
    require,
    run_example,
    store_url,
)

pytestmark = pytest.mark.e2e

#: example file -> the test(s) below that run it; a new example without a test fails
COVERED = {
    "quick_start.py": "test_quick_start",
    "basic.py": "test_basic_sync_runs_once_per_slot, test_basic_ctrl_c_hands_report_over",
    "billing.py": "test_billing_crash_is_not_retried_and_charges_are_keyed",
    "nightly_export.py": "test_nightly_export_catches_up, test_nightly_export_shows_next_runs",
    "cache_refresh.py": "test_cache_refresh",
    "broker_notifications.py": "test_broker_notifications",
    "tenants.py": "test_tenants",
    "http_api.py": "test_http_api_serves_history_from_a_process_without_jobs",
    "failover.py": "test_failover",
    "decorators_and_data.py": "test_decorators_and_data",
    "dramatiq_app.py": "test_dramatiq_app",
    "celery_app.py": "test_celery_app",
    "asyncio_app.py": "test_asyncio_app_runs_each_slot_once_across_two_processes",
    "asgi_lifespan.py": "test_asgi_lifespan_runs_the_scheduler_with_the_server",
}


def test_every_example_has_a_test() -> None:
    examples = {path.name for path in EXAMPLES.glob("*.py")}
    assert examples - set(COVERED) == set(), "examples without an end-to-end test"
    assert set(COVERED) - examples == set(), "tests for examples that no longer exist"


@pytest.mark.parametrize("script", sorted(COVERED))
def test_every_example_takes_seconds_and_backend(script: str) -> None:
    """The docs promise both flags on every example."""
    result = subprocess.run([sys.executable, str(EXAMPLES / script), "--help"], cwd=ROOT,
                            env=example_env(), capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "--seconds" in result.stdout and "--backend" in result.stdout, result.stdout


def test_quick_start(tmp_path: Path) -> None:
    output = run_example("quick_start.py", timeout=120, env=example_env(TMPDIR=str(tmp_path)))
    for word in ("taken", "attempt 2", "takeover"):
        assert word in output, f"quick start output lacks {word!r}:\n{output}"
    assert "SIGINT" in output and "SIGKILL" in output and "done" in output
    assert list(tmp_path.iterdir()) == []  # its temporary SQLite folder is gone


def test_quick_start_seconds_and_backend() -> None:
    url = store_url("redis")
    output = run_example("quick_start.py", "--seconds", "5", "--backend", url, timeout=40)
    assert f"store: {url}" in output and "stopped after 5 s (--seconds)" in output, output


@pytest.mark.parametrize("script", ["quick_start.py", "failover.py"])
def test_ctrl_c_stops_the_demo_without_traceback(script: str, tmp_path: Path) -> None:
    demo = Example(script, env=example_env(TMPDIR=str(tmp_path)), new_session=True)
    try:
        demo.wait_for(r"up", 20)
        demo.interrupt_group()  # Ctrl+C in a terminal reaches the demo and its instances
        output = demo.finish(30)
    finally:
        demo.kill()
    assert "interrupted: stopping the instances" in output, output
    assert "Traceback" not in output and "Task was destroyed" not in output, output
    assert list(tmp_path.iterdir()) == []


# -- basic.py (Redis) ------------------------------------------------------------------------

def test_basic_sync_runs_once_per_slot() -> None:
    url = store_url("redis")
    copies = [Example("basic.py", "--backend", url, "--seconds", "14") for _ in range(2)]
    outputs = [copy.finish(60) for copy in copies]
    ran = [slot for out in outputs
           for slot in re.findall(r"sync   slot (\S+) ran here", out)]
    skipped = [slot for out in outputs
               for slot in re.findall(r"sync   slot (\S+) skipped \(taken", out)]
    assert ran, "\n".join(outputs)
    assert all(count == 1 for count in Counter(ran).values()), "\n".join(outputs)
    assert set(skipped) <= set(ran) and skipped, "\n".join(outputs)


def test_basic_ctrl_c_hands_report_over() -> None:
    url = store_url("redis")
    copies = [Example("basic.py", "--backend", url, "--report-every", "5s") for _ in range(2)]
    try:
        for copy in copies:
            copy.wait_for(r"up on redis:lease", 20)
        runner = None
        deadline = time.monotonic() + 20
        while runner is None and time.monotonic() < deadline:
            runner = next((c for c in copies if c.has(r"report slot \S+ working")), None)
            time.sleep(0.1)
        assert runner is not None, "\n".join(c.output for c in copies)
        backup = copies[1] if runner is copies[0] else copies[0]
        sent = time.monotonic()
        runner.signal(signal.SIGINT)  # Ctrl+C in the runner's terminal
        runner.wait_for(r"interrupted \(stop\): handed over", 10)
        backup.wait_for(r"report slot \S+ attempt 2 started \(takeover\)", 10)
        assert time.monotonic() - sent < 5  # two heartbeats (1 s) plus process overhead
        runner.finish(30)
    finally:
        for copy in copies:
            if copy.proc.poll() is None:
                copy.signal(signal.SIGINT)
        for copy in copies:
            copy.finish(30, expect_code=None)


# -- the "choosing by what a job needs" examples ---------------------------------------------

def test_billing_crash_is_not_retried_and_charges_are_keyed(tmp_path: Path) -> None:
    url = store_url("postgres")
    ledger = str(tmp_path / "ledger.db")
    args = ("--backend", url, "--ledger", ledger, "--crash-once", "--seconds", "13")
    copies = [Example("billing.py", *args) for _ in range(2)]
    codes = [copy.proc.wait(60) for copy in copies]
    outputs = [copy.finish(10, expect_code=None) for copy in copies]
    text = "\n".join(outputs)
    assert sorted(codes) == [0, 3], text  # exactly one copy crashed, once
    survivor = outputs[codes.index(0)]
    assert re.search(r"interrupted .*not retried \(max_attempts=1\)", survivor), text
    assert "0 customer(s) charged twice for one period" in survivor, text
    with sqlite3.connect(ledger) as db:
        rows = db.execute("SELECT customer, slot, COUNT(*) FROM charges "
                          "GROUP BY customer, slot").fetchall()
    assert rows and all(count == 1 for _, _, count in rows)
    crashed_slot = int(re.findall(r"crashing half-way through slot (\d+)", text)[0])
    # the crashed period was charged for the first customer only, and never again
    assert [r for r in rows if r[1] == crashed_slot] == [("acme", crashed_slot, 1)]


def test_nightly_export_catches_up(tmp_path: Path) -> None:
    output = run_example("nightly_export.py", "--demo", "--backend", store_url("redis"),
                         timeout=60, env=example_env(TMPDIR=str(tmp_path)))
    assert re.search(r"export for slot \S+ written \(catch-up, attempt 1\)", output), output
    assert "reason catch-up, success" in output, output
    assert list(tmp_path.iterdir()) == []  # the demo's export files are gone


def test_nightly_export_shows_next_runs() -> None:
    output = run_example("nightly_export.py", "--seconds", "2", "--backend",
                         store_url("sqlite"), timeout=30)
    assert "02:00 in Berlin" in output and "stopped" in output, output


@pytest.mark.parametrize("store", ["sqlite", "nats"])
def test_cache_refresh(store: str) -> None:
    output = run_example("cache_refresh.py", "--seconds", "6", "--backend", store_url(store),
                         timeout=40)
    assert re.search(r"cache refreshed for slot \S+ \(\d\.\d\d s after the slot", output), \
        output
    assert "'refreshed_for'" in output, output


@pytest.mark.parametrize("broker", ["rabbitmq", "nats"])
def test_broker_notifications(broker: str, tmp_path: Path) -> None:
    spec = require(broker)
    env_url = {"rabbitmq": "ANARCHON_RABBITMQ_URL", "nats": "ANARCHON_NATS_URL"}[broker]
    base = spec.url_for("unused").split("?")[0]  # the server; the example sets its prefix
    env = example_env(ANARCHON_BROKER=broker, OUTBOX_DB=str(tmp_path / "outbox.db"),
                      **{env_url: base})
    # one copy picks the broker from the environment, the other from --backend
    copies = [Example("broker_notifications.py", "--seconds", "8", env=env),
              Example("broker_notifications.py", "--seconds", "8", "--backend",
                      str(backend_from_env_url(broker, base)), env=env)]
    outputs = [copy.finish(60) for copy in copies]
    text = "\n".join(outputs)
    sends = re.findall(r"slot (\S+): sent (\d+) notification", text)
    assert sends, text
    assert sum(int(count) for _, count in sends) == 6, text  # 3 queued by each copy, once
    assert all(n == 1 for n in Counter(slot for slot, _ in sends).values()), text


def test_tenants() -> None:
    output = run_example("tenants.py", "--seconds", "5", "--backend", store_url("postgres"),
                         timeout=40)
    assert "registered ['acme-sync', 'acme-digest']" in output, output
    assert "(09:00 America/New_York)" in output, output
    assert "acme-sync: syncing acme (plan gold, batch 100, region eu)" in output, output
    assert "a second object with the same prefix is refused" in output, output


def test_http_api_serves_history_from_a_process_without_jobs() -> None:
    api = Example("http_api.py", "--demo", "--port", "0", "--seconds", "12",
                  "--backend", store_url("redis"))
    try:
        base = api.wait_for(r"serving history on (http://\S+)/jobs", 20)[1]
        records: list[dict[str, Any]] = []
        deadline = time.monotonic() + 10
        while not records and time.monotonic() < deadline:
            with urllib.request.urlopen(f"{base}/jobs/tick/history?count=5", timeout=5) as r:
                assert r.headers["Content-Type"] == "application/json"
                records = json.load(r)
            time.sleep(0.2)
        assert records, api.output
        assert records[0]["name"] == "tick" and records[0]["status"] in ("running", "success")
        assert records[0]["scheduled_at"].endswith("+00:00")
        with urllib.request.urlopen(f"{base}/jobs", timeout=5) as r:
            assert [job["name"] for job in json.load(r)] == ["tick"]
        output = api.finish(40)
    finally:
        api.kill()
    assert "worker: tick for slot" in output and "stopped" in output


def test_asyncio_app_runs_each_slot_once_across_two_processes() -> None:
    url = store_url("redis")
    copies = [Example("asyncio_app.py", "--backend", url, "--seconds", "7") for _ in range(2)]
    outputs = [copy.finish(60) for copy in copies]
    text = "\n".join(outputs)
    ran = [slot for out in outputs for slot in re.findall(r"poll: slot (\S+) ran here", out)]
    assert len(ran) >= 2 and all(n == 1 for n in Counter(ran).values()), text
    assert all("stopped" in out and "Traceback" not in out for out in outputs), text


def test_asgi_lifespan_runs_the_scheduler_with_the_server() -> None:
    pytest.importorskip("starlette")
    pytest.importorskip("uvicorn")
    app = Example("asgi_lifespan.py", "--port", "0", "--seconds", "10",
                  "--backend", store_url("postgres"))
    try:
        base = app.wait_for(r"serving on (http://\S+) ", 30)[1]
        records: list[dict[str, Any]] = []
        deadline = time.monotonic() + 15
        while not any(r["status"] == "success" for r in records):
            assert time.monotonic() < deadline, app.output
            with urllib.request.urlopen(f"{base}/history", timeout=5) as r:
                records = json.load(r)
            time.sleep(0.2)
        output = app.finish(60)
    finally:
        app.kill()
    assert "refresh: slot" in output and "stopped" in output, output
    assert "Traceback" not in output, output


@pytest.mark.parametrize("store", ["sqlite", "redis", "postgres"])
def test_failover(store: str, tmp_path: Path) -> None:
    output = run_example("failover.py", "--backend", store_url(store), "--seconds", "45",
                         timeout=120, env=example_env(TMPDIR=str(tmp_path)))
    assert list(tmp_path.iterdir()) == []  # no temporary folder with --backend
    runner = re.search(r"freezing (\w) \(SIGSTOP\)", output)
    assert runner, output
    assert re.search(r"attempt 2 started \(takeover\)", output), output
    assert re.search(rf"\[{runner[1]}\] .*attempt 1 lost: a backup took over", output), output
    assert "attempt 2 succeeded" in output, output


def test_decorators_and_data() -> None:
    output = run_example("decorators_and_data.py", "--seconds", "6", "--backend",
                         store_url("sqlite"), timeout=40)
    assert "jobs on 'default': ['cleanup', 'rotate', 'mailer-flush']" in output, output
    assert "'level': 'run_now'" in output and "'dry_run': True" in output, output
    assert re.search(r"rotate +\(scheduled\) .*'token': 'tok-\d+'", output), output
    assert "from ops@example.com" in output, output


# -- the framework examples -----------------------------------------------------------------

def test_dramatiq_app() -> None:
    pytest.importorskip("dramatiq")
    url = store_url("redis")
    broker = url.split("?")[0]
    env = example_env(DRAMATIQ_BROKER_URL=broker)
    output = run_example("dramatiq_app.py", "--seconds", "7", "--backend", url, env=env,
                         timeout=90)
    assert re.search(r"refresh_cache for slot \d+", output), output
    assert "history of refresh_cache" in output, output
    assert re.search(r"slot \d+ attempt 1 success", output), output


def test_celery_app(tmp_path: Path) -> None:
    pytest.importorskip("celery")
    url = store_url("redis")
    env = example_env(REDIS_URL=url.split("?")[0], TMPDIR=str(tmp_path))
    output = run_example("celery_app.py", "--seconds", "8", "--backend", url, env=env,
                         timeout=120)
    assert re.search(r"published 1x by beat", output), output
    assert list(tmp_path.iterdir()) == []  # beat state files and the log are gone


def backend_from_env_url(broker: str, base: str) -> str:
    """The URL ``broker_notifications.py`` builds from its environment, spelled out."""
    if broker == "nats":
        return (f"{base}?stream=OUTBOX_EXAMPLE&prefix=outbox-example.&duplicate_window=2m")
    return f"{base}?prefix=outbox-example.&slot_ttl=2m"
