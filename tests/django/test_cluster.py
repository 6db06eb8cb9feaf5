"""Three ``manage.py anarchon run`` processes on the "django" backend (SQLite file,
PostgreSQL and MariaDB): each slot starts exactly once; SIGKILL of the runner -> takeover;
``manage.py anarchon status --json`` shows a SIGKILLed instance not alive within lease +
2 heartbeats."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tests.django.support import wait_for
from tests.stores import in_ci

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
LEASE, HEARTBEAT = 2.0, 0.3
HANDLER = "tests.django.testapp.handlers.record"


class Project:
    """The test project on one database; runs ``manage.py`` commands as processes."""

    def __init__(self, env: dict[str, str], tmp: Path) -> None:
        self.tmp = tmp
        self.log = tmp / "runs.jsonl"
        self.env = {**os.environ, "PYTHONPATH": str(ROOT), "ANARCHON_TEST_LOG": str(self.log),
                    "DJANGO_SETTINGS_MODULE": "tests.django.settings",
                    "ANARCHON_TEST_SCHEDULER": json.dumps({"lease": LEASE,
                                                           "heartbeat": HEARTBEAT}),
                    **env}
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    def manage(self, *args: str, jobs: dict[str, Any] | None = None) -> None:
        env = {**self.env, "ANARCHON_TEST_JOBS": json.dumps(jobs or {})}
        subprocess.run([sys.executable, "-m", "tests.django.manage", *args],
                       cwd=ROOT, env=env, check=True, timeout=120)

    def start(self, names: list[str], jobs: dict[str, Any]) -> None:
        env = {**self.env, "ANARCHON_TEST_JOBS": json.dumps(jobs)}
        began = time.monotonic()
        for name in names:
            out = (self.tmp / f"{name}.out").open("wb")
            self.procs[name] = subprocess.Popen(
                [sys.executable, "-m", "tests.django.manage", "anarchon", "run",
                 "--jobs", ",".join(jobs), "--stop-timeout", "5"],
                cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
        wait_for(lambda: all("running" in (self.tmp / f"{n}.out").read_text()
                             for n in names), 60, "every instance to start")
        print(f"{len(names)} instances ready in {time.monotonic() - began:.1f}s")

    def status(self) -> dict[str, Any]:
        """``manage.py anarchon status --json`` in a process of its own."""
        result = subprocess.run([sys.executable, "-m", "tests.django.manage", "anarchon",
                                 "status", "--json"], cwd=ROOT, env=self.env,
                                capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stderr
        document: dict[str, Any] = json.loads(result.stdout)
        return document

    def records(self) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines() if line]

    def begins(self) -> list[dict[str, Any]]:
        return [r for r in self.records() if r["kind"] == "begin"]

    def stop(self) -> dict[str, int | None]:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        codes: dict[str, int | None] = {}
        for name, proc in self.procs.items():
            try:
                codes[name] = proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                codes[name] = proc.wait()
        return codes


def _postgres_database() -> Iterator[dict[str, str]]:
    from tests.stores.postgres import BASE_URL, STORE

    reason = STORE.unavailable()
    if reason is not None:
        if in_ci():
            pytest.fail(f"CI needs PostgreSQL: {reason}", pytrace=False)
        pytest.skip(f"PostgreSQL not available: {reason}")
    import psycopg

    name = "anarchon_dj_" + uuid.uuid4().hex[:10]
    with psycopg.connect(BASE_URL, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield {"ANARCHON_DJANGO_DB": "postgres", "ANARCHON_DJANGO_PG": name}
    finally:
        with psycopg.connect(BASE_URL, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _mariadb_database() -> Iterator[dict[str, str]]:
    from tests.stores.django_support import admin, unavailable

    reason = unavailable("mariadb")
    if reason is not None:
        if in_ci():
            pytest.fail(f"CI needs MariaDB: {reason}", pytrace=False)
        pytest.skip(f"MariaDB not available: {reason}")
    name = "anarchon_dj_" + uuid.uuid4().hex[:10]
    admin("mariadb", f"CREATE DATABASE {name} CHARACTER SET utf8mb4")
    try:
        yield {"ANARCHON_DJANGO_DB": "mariadb", "ANARCHON_DJANGO_MARIADB": name}
    finally:
        admin("mariadb", f"DROP DATABASE IF EXISTS {name}")


@pytest.fixture(params=["sqlite", "postgres", "mariadb"])
def project(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Project]:
    if request.param == "sqlite":
        env = {"ANARCHON_DJANGO_DB": "sqlite", "ANARCHON_DJANGO_SQLITE": str(tmp_path / "p.db")}
        made = Project(env, tmp_path)
        made.manage("migrate", "--verbosity", "0")
        yield made
        made.stop()
        return
    databases = _postgres_database() if request.param == "postgres" else _mariadb_database()
    env = next(databases)
    made = Project(env, tmp_path)
    try:
        made.manage("migrate", "--verbosity", "0")
        yield made
    finally:
        made.stop()
        for _ in databases:
            pass


def test_migrate_creates_the_store_tables(tmp_path: Path) -> None:
    project = Project({"ANARCHON_DJANGO_DB": "sqlite",
                       "ANARCHON_DJANGO_SQLITE": str(tmp_path / "m.db")}, tmp_path)
    project.manage("migrate", "--verbosity", "0")
    with sqlite3.connect(tmp_path / "m.db") as conn:
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
    assert {"anarchon_django_store_job", "anarchon_django_store_run",
            "anarchon_django_store_attempt", "anarchon_django_store_trigger"} <= tables
    journal = conn.execute("PRAGMA journal_mode").fetchone()[0]
    assert journal == "delete", "the project's db file was switched to WAL"


def test_three_instances_start_each_slot_once(project: Project) -> None:
    jobs = {"tick": {"callable": HANDLER, "every": "1s", "data": {"duration": 0.2}}}
    project.start(["a", "b", "c"], jobs)
    wait_for(lambda: len({r["slot"] for r in project.begins()}) >= 6, 30, "six slots")
    codes = project.stop()
    assert set(codes.values()) == {0}, codes
    starts = Counter(r["slot"] for r in project.begins())
    assert set(starts.values()) == {1}, starts
    slots = sorted(starts)
    assert slots == list(range(slots[0], slots[-1] + 1, 1000)), "a slot was lost"
    assert len({r["pid"] for r in project.begins()}) >= 1


def test_sigkill_of_the_runner_hands_the_run_to_a_backup(project: Project) -> None:
    slot = int(time.time()) + 12  # the same one-off slot for every process
    jobs = {"long": {"callable": HANDLER, "at": slot, "data": {"duration": 30}}}
    project.start(["a", "b", "c"], jobs)
    assert time.time() < slot - 1, "the instances took too long to start"
    first = wait_for(lambda: [r for r in project.begins() if r["attempt"] == 1], 20,
                     "attempt 1")[0]
    os.kill(first["pid"], signal.SIGKILL)
    killed = time.time()
    second = wait_for(lambda: [r for r in project.begins() if r["attempt"] == 2],
                      LEASE + 10, "attempt 2")[0]
    assert second["reason"] == "takeover" and second["pid"] != first["pid"]
    delay = second["t"] - killed
    print(f"takeover after SIGKILL: {delay:.2f}s (lease {LEASE}s, heartbeat {HEARTBEAT}s)")
    assert delay <= LEASE + 2 * HEARTBEAT + 1.0


def _alive_by_pid(document: dict[str, Any]) -> dict[int, bool]:
    return {i["pid"]: i["alive"] for i in document["instances"]}


def _seconds(stamp: str) -> float:
    return datetime.fromisoformat(stamp).timestamp()


def test_status_shows_a_sigkilled_instance_not_alive(project: Project) -> None:
    project.start(["a", "b", "c"], {"tick": {"callable": HANDLER, "every": "1s"}})
    pids = {name: proc.pid for name, proc in project.procs.items()}
    took: list[float] = []  # how long each status command took

    def status_until(check: Callable[[dict[str, Any]], bool], timeout: float
                     ) -> dict[str, Any]:
        def read() -> dict[str, Any] | None:
            began = time.monotonic()
            document = project.status()
            took.append(time.monotonic() - began)
            return document if check(document) else None

        found = wait_for(read, timeout, "manage.py anarchon status")
        assert found is not None
        return found

    before = status_until(lambda d: all(_alive_by_pid(d).get(p) for p in pids.values()), 30)
    for instance in before["instances"]:
        assert instance["host"] and instance["version"], instance
    assert [j["name"] for j in before["jobs"]] == ["tick"] and before["jobs"][0]["next_run"]

    os.kill(pids["b"], signal.SIGKILL)  # no word to the store
    project.procs["b"].wait()
    killed = time.time()
    after = status_until(lambda d: _alive_by_pid(d).get(pids["b"]) is False,
                         LEASE + 2 * HEARTBEAT + 10)
    shown = time.time() - killed
    assert _alive_by_pid(after) == {pids["a"]: True, pids["b"]: False, pids["c"]: True}
    # its record is alive for lease + 1 heartbeat after its last beat, which came before
    # the kill: by the store's clock it is not alive within lease + 2 heartbeats
    [dead] = [i for i in after["instances"] if i["pid"] == pids["b"]]
    assert _seconds(dead["last_seen"]) <= killed + 0.1, (dead, killed)
    assert _seconds(after["now"]) - _seconds(dead["last_seen"]) >= LEASE + HEARTBEAT, after
    # seen from here, each status command (a Django process) adds its own time
    assert shown < LEASE + 2 * HEARTBEAT + max(took) + 1.0, (shown, took)
    print(f"shown not alive {shown:.2f}s after SIGKILL (lease {LEASE}s, heartbeat "
          f"{HEARTBEAT}s; a status command took up to {max(took):.2f}s)")
