"""The commands answer like commands: one line on stderr naming the problem and the store
(password redacted), exit 2 for usage and 1 for failures, a traceback only with
``--traceback``, and a read-only command never creates a store. Real subprocess runs."""

from __future__ import annotations

import asyncio
import signal
import socket
import subprocess
import sys
import threading
import time
from datetime import datetime
from functools import partial
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit, urlunsplit

import pytest

from anarchon import Scheduler, from_url
from anarchon.backends.capabilities import ValueStore
from tests.harness.examples import ROOT, example_env, store_url

pytestmark = pytest.mark.e2e

PROJECT = ROOT / "example_project"


def command(*args: str, cwd: Path = ROOT, module: str = "anarchon",
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", module, *args], cwd=cwd,
                          env=env or example_env(), capture_output=True, text=True,
                          timeout=60)


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def set_event(event: threading.Event, _: object) -> None:
    event.set()


def one_line_error(result: subprocess.CompletedProcess[str], code: int) -> str:
    assert result.returncode == code, result.stdout + result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


@pytest.mark.parametrize("scheme", ["redis", "postgresql"])
def test_unreachable_store_is_one_line_naming_it_without_password(scheme: str) -> None:
    url = f"{scheme}://user:s3cret@127.0.0.1:{closed_port()}/0"
    line = one_line_error(command("jobs", "--backend", url), 1)
    assert line.startswith("anarchon jobs: ") and "cannot use the store" in line, line
    assert f"user:***@127.0.0.1:{url.split(':')[-1].split('/')[0]}" in line, line
    assert "s3cret" not in line


def test_traceback_only_when_asked() -> None:
    url = f"redis://127.0.0.1:{closed_port()}"
    result = command("jobs", "--backend", url, "--traceback")
    assert result.returncode == 1
    assert "Traceback" in result.stderr and "StoreError" in result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith("anarchon jobs: ")


@pytest.mark.parametrize("subcommand", [["jobs"], ["history", "sync"]])
def test_missing_sqlite_file_is_not_created(tmp_path: Path, subcommand: list[str]) -> None:
    result = command(*subcommand, "--backend", "sqlite:///typo.db", cwd=tmp_path)
    line = one_line_error(result, 1)
    assert f"no SQLite database at {tmp_path / 'typo.db'}" in line, line
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(("args", "needle"), [
    (["jobs", "--backend", "nosuch://u:pw@host"], "invalid backend URL: unknown backend URL"),
    (["jobs", "--backend", "sqlite://host/jobs.db"], "invalid SQLite URL"),
    (["jobs", "--backend", "sqlite:/jobs.db"], "invalid SQLite URL 'sqlite:/jobs.db': use "
                                               "sqlite:///relative/file.db (three slashes)"),
    (["jobs", "--backend", "postgresql://u:pw@127.0.0.1:1/db?sslmdoe=require"],
     'invalid PostgreSQL URL postgresql://u:***@127.0.0.1:1/db?sslmdoe=require: invalid URI '
     'query parameter: "sslmdoe"'),
    (["jobs", "--backend", "postgresql://u:pw@127.0.0.1:1/db?create=maybe"],
     "create must be 1 or 0"),
    (["jobs"], "give --backend URL or set ANARCHON_BACKEND"),
    (["history", "sync", "--count", "0", "--backend", "redis://:pw@127.0.0.1:1"],
     "--count must be at least 1, got 0"),
])
def test_usage_errors_exit_2(args: list[str], needle: str, tmp_path: Path) -> None:
    result = command(*args, cwd=tmp_path)
    line = one_line_error(result, 2)
    assert needle in line and "pw" not in line, line


def test_history_of_an_unknown_job_fails_and_an_empty_one_says_so() -> None:
    url = store_url("redis")
    with Scheduler(from_url(url)) as scheduler:
        scheduler.every("known", "1h", lambda ctx: None)
    line = one_line_error(command("history", "nosuchjob", "--backend", url), 1)
    assert "unknown job 'nosuchjob' (jobs in this store: known)" in line, line
    result = command("history", "known", "--backend", url)
    assert result.returncode == 0 and result.stdout == ""
    assert result.stderr.strip() == "no runs yet"
    listed = command("jobs", "--backend", url)
    assert listed.returncode == 0, listed.stderr
    # the next run of a job declared in another process: from its stored schedule
    # (issue 35: it was "-")
    header, row = [line.split() for line in listed.stdout.splitlines()]
    assert header == ["NAME", "SCHEDULE", "SOURCE", "FRAMEWORK", "NEXT", "RUN", "(UTC)",
                      "STATE"]
    assert row[:5] == ["known", "every", "1h", "code", "plain"], row
    next_run = datetime.strptime(" ".join(row[5:7]), "%Y-%m-%d %H:%M:%S")
    assert len(row) == 7 and next_run.minute == next_run.second == 0, row


def test_help_is_plain_text() -> None:
    for args in (["--help"], ["jobs", "--help"], ["history", "--help"], ["purge", "--help"],
                 ["scenarios", "--help"], ["pause", "--help"], ["resume", "--help"],
                 ["reschedule", "--help"], ["add", "--help"], ["remove", "--help"],
                 ["changes", "--help"]):
        result = command(*args)
        assert result.returncode == 0, result.stderr
        assert "``" not in result.stdout and "usage: anarchon" in result.stdout


def test_anarchon_dramatiq_waits_for_an_unreachable_store(tmp_path: Path) -> None:
    """``anarchon-dramatiq`` runs until stopped, so a store that does not answer is waited
    for (the fault issue's rule for long-running entry points): one WARNING naming the
    store without its password, no traceback, and SIGTERM ends the wait cleanly. A bad
    URL is still a usage error at once."""
    pytest.importorskip("dramatiq")
    (tmp_path / "stubjobs.py").write_text(
        "import dramatiq\nfrom dramatiq.brokers.stub import StubBroker\n"
        "import anarchon_dramatiq\n"
        "dramatiq.set_broker(StubBroker())\n"
        "@anarchon_dramatiq.every('1h')\n@dramatiq.actor\ndef tick() -> None: ...\n")
    port = closed_port()
    url = f"redis://:s3cret@127.0.0.1:{port}"
    proc = subprocess.Popen([sys.executable, "-m", "anarchon_dramatiq", "stubjobs",
                             "--backend", url], cwd=tmp_path, env=example_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    try:
        deadline = time.monotonic() + 30
        lines: list[str] = []
        while not any("WARNING" in line for line in lines):
            assert time.monotonic() < deadline, "".join(lines)
            assert proc.poll() is None, "".join(lines) + proc.stderr.read()
            lines.append(proc.stderr.readline())
        warning = next(line for line in lines if "WARNING" in line)
        assert f"127.0.0.1:{port}" in warning and "s3cret" not in warning
    finally:
        proc.send_signal(signal.SIGTERM)
        _, rest = proc.communicate(timeout=30)
    output = "".join(lines) + rest
    assert proc.returncode == 0, output
    assert "Traceback" not in output and "s3cret" not in output
    bad = command("stubjobs", "--backend", "nosuch://x", cwd=tmp_path,
                  module="anarchon_dramatiq")
    assert bad.returncode == 2 and "unknown backend URL scheme" in bad.stderr


def test_manage_py_anarchon_unreachable_store_is_one_line(tmp_path: Path) -> None:
    pytest.importorskip("django")
    url = f"redis://:s3cret@127.0.0.1:{closed_port()}"
    env = example_env(EXAMPLE_DB=str(tmp_path / "db.sqlite3"), EXAMPLE_ANARCHON_BACKEND=url,
                      DJANGO_SETTINGS_MODULE="project.settings")
    result = subprocess.run([sys.executable, "manage.py", "anarchon", "history"], cwd=PROJECT,
                            env=env, capture_output=True, text=True, timeout=60)
    line = one_line_error(result, 1)
    assert line.startswith("CommandError: redis://:***@127.0.0.1:"), line
    assert "cannot use the store" in line and "s3cret" not in line


@pytest.mark.parametrize("store", ["sqlite", "redis", "redis-cluster", "postgres"])
def test_purge_lists_then_deletes_one_namespace(store: str) -> None:
    url, other = store_url(store), store_url(store)
    for namespace in (url, other):
        done = threading.Event()
        with Scheduler(from_url(namespace), jitter=0) as scheduler:
            scheduler.on("success", partial(set_event, done))
            scheduler.every("tick", "1s", lambda ctx: None)
            assert done.wait(10), "no run to purge"
    dry = command("purge", "--backend", url)
    assert dry.returncode == 0, dry.stderr
    assert "would delete 1 job(s) with their history: tick; add --yes" in dry.stdout
    assert command("history", "tick", "--backend", url).returncode == 0  # still there
    purged = command("purge", "--backend", url, "--yes")
    assert purged.returncode == 0 and "deleted 1 job(s)" in purged.stdout, purged.stderr
    gone = command("history", "tick", "--backend", url)
    assert gone.returncode == 1 and "unknown job 'tick'" in gone.stderr
    assert command("jobs", "--backend", url).stdout == ""
    kept = command("history", "tick", "--backend", other)  # the other namespace is untouched
    assert kept.returncode == 0 and "success" in kept.stdout, kept.stderr


def test_purge_on_a_claim_only_broker_says_it_cannot() -> None:
    url = store_url("rabbitmq")
    line = one_line_error(command("purge", "--backend", url, "--yes"), 1)
    assert "cannot purge its namespace" in line and "Troubleshooting" in line, line


@pytest.mark.parametrize("store", ["sqlite", "redis", "postgres"])
def test_forget_says_what_would_go_then_removes_one_job(store: str) -> None:
    url = store_url(store)
    done = threading.Event()
    with Scheduler(from_url(url), jitter=0) as scheduler:
        scheduler.on("success", partial(set_event, done))
        scheduler.every("tick", "1s", lambda ctx: None)
        scheduler.every("kept", "1h", lambda ctx: None)
        assert done.wait(10), "no run to forget"
    dry = command("forget", "tick", "--backend", url)
    assert dry.returncode == 0, dry.stderr
    assert "would remove job 'tick' (still registered by an instance, last registered " \
        in dry.stdout and "add --yes" in dry.stdout, dry.stdout
    forgot = command("forget", "tick", "--backend", url, "--yes")
    assert forgot.returncode == 0 and "removed job 'tick'" in forgot.stdout, forgot.stderr
    assert [line.split()[0] for line in
            command("jobs", "--backend", url).stdout.splitlines()] == ["NAME", "kept"]
    unknown = one_line_error(command("forget", "tick", "--backend", url), 1)
    assert "unknown job 'tick' (jobs in this store: kept)" in unknown, unknown


@pytest.mark.parametrize("store", ["sqlite", "redis", "postgres"])
def test_purge_lists_dynamic_jobs_and_removes_shared_values(store: str) -> None:
    """A dynamic job no instance registered is in the preview; ``--yes`` leaves no value
    (nor, on Redis, any key of the prefix)."""
    url = store_url(store)
    ops = Scheduler(from_url(url))  # never started: it only talks to the store
    try:
        ops.add_job("dyn", handler="export", every="1h")
    finally:
        ops.close()

    async def value(write: bool) -> str | None:
        backend = from_url(url)
        assert isinstance(backend, ValueStore)
        try:
            if write:
                assert await backend.swap_value("dyn", "cursor", None, "1")
            return await backend.read_value("dyn", "cursor")
        finally:
            await backend.close()

    assert asyncio.run(value(True)) == "1"
    dry = command("purge", "--backend", url)
    assert dry.returncode == 0, dry.stderr
    assert "would delete 1 job(s) with their history: dyn; add --yes" in dry.stdout, dry.stdout
    purged = command("purge", "--backend", url, "--yes")
    assert purged.returncode == 0 and "deleted 1 job(s)" in purged.stdout, purged.stderr
    assert asyncio.run(value(False)) is None
    if store == "redis":
        import redis

        parts = urlsplit(url)
        prefix = dict(parse_qsl(parts.query))["prefix"]
        client = redis.Redis.from_url(urlunsplit(parts._replace(query="")))
        try:
            assert list(client.scan_iter(match=f"*{prefix}*", count=1000)) == []
        finally:
            client.close()
