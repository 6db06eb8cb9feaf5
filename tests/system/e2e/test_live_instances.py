"""Live instances, health and doctor, with real servers and real processes: three
instances on each lease store, ``anarchon status`` before and after ``kill -9`` of one
(alive -> not alive within lease + 2 heartbeats), ``anarchon health`` and ``anarchon
doctor`` exit codes with the store up, down, (doctor) skewed by ``faketime``, and of
another format version (doctor shows the stored one against the one this code needs)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qsl, urlsplit, urlunsplit

import pytest

from tests.harness.examples import ROOT, example_env, store_url
from tests.system.e2e.test_cli import closed_port, command

pytestmark = pytest.mark.e2e

LEASE = 2.0
HEARTBEAT = 0.5
STORES = ("redis", "valkey", "postgres", "sqlite")

WORKER = f"""
import asyncio, sys
from anarchon import AsyncScheduler
from anarchon.backends import from_url

async def main() -> None:
    scheduler = AsyncScheduler(from_url(sys.argv[1]), instance_id=sys.argv[2],
                               lease={LEASE}, heartbeat={HEARTBEAT})

    @scheduler.every("tick", 1)
    async def tick(ctx: object) -> None:
        await asyncio.sleep(0.6)

    @scheduler.every("broken", 1)
    def broken(ctx: object) -> None:
        raise RuntimeError("broken on purpose")

    await scheduler.run()

asyncio.run(main())
"""


def spawn(url: str, instance: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", WORKER, url, instance], cwd=ROOT,
                            env=example_env(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)


def alive(document: dict[str, Any]) -> dict[str, bool]:
    return {i["id"]: i["alive"] for i in document["instances"]}


def poll(url: str, check: Any, timeout: float) -> dict[str, Any]:
    """Poll ``anarchon status`` until ``check`` holds or the deadline passes. Until the
    first instance has created the store (a SQLite file appears only then), ``status``
    rightly fails; that counts as "not yet", and is the assertion at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        result = command("status", "--backend", url, "--json")
        expired = time.monotonic() > deadline
        if result.returncode == 0:
            document: dict[str, Any] = json.loads(result.stdout)
            if check(document) or expired:
                return document
        else:
            assert not expired, result.stderr
        time.sleep(0.2)


@pytest.fixture
def three(request: pytest.FixtureRequest) -> Iterator[tuple[str, dict[str, Any]]]:
    url = store_url(request.param)
    procs = {name: spawn(url, name) for name in ("a", "b", "c")}
    try:
        yield url, procs
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in procs.values():
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()


@pytest.mark.parametrize("three", STORES, indirect=True)
def test_status_shows_a_killed_instance_not_alive_within_lease_and_two_heartbeats(
        three: tuple[str, dict[str, subprocess.Popen[bytes]]]) -> None:
    url, procs = three
    before = poll(url, lambda d: alive(d) == {"a": True, "b": True, "c": True}, 30)
    assert alive(before) == {"a": True, "b": True, "c": True}, before
    for instance in before["instances"]:
        assert instance["pid"] == procs[instance["id"]].pid, instance
        assert instance["version"] and instance["host"], instance
    jobs = {j["name"]: j for j in before["jobs"]}
    assert set(jobs) == {"broken", "tick"} and all(j["next_run"] for j in jobs.values())
    # the runs each instance holds, with their lease end ("broken" may show briefly too)
    def ticks(d: dict[str, Any]) -> list[dict[str, Any]]:
        return [r for i in d["instances"] for r in i["running"] if r["job"] == "tick"]

    holding = poll(url, ticks, 10)
    assert ticks(holding), holding
    run = ticks(holding)[0]
    assert run["job"] == "tick" and run["attempt"] >= 1 and run["lease_expires_at"], holding
    failed = poll(url, lambda d: d["failures"], 10)
    assert failed["failures"][0]["job"] == "broken", failed
    assert "broken on purpose" in failed["failures"][0]["error"], failed

    procs["b"].kill()  # SIGKILL: no word to the store
    procs["b"].wait()
    killed_at = time.monotonic()
    after = poll(url, lambda d: alive(d).get("b") is False, LEASE + 2 * HEARTBEAT + 5)
    took = time.monotonic() - killed_at
    assert alive(after) == {"a": True, "b": False, "c": True}, after
    # the record expires lease + 1 heartbeat after the last beat; each `status` call
    # (a process start) adds its own time
    assert took < LEASE + 2 * HEARTBEAT + 3, took

    health = command("health", "--backend", url, "--instance", "a")
    assert health.returncode == 0, health.stdout + health.stderr
    dead = command("health", "--backend", url, "--instance", "b")
    assert dead.returncode == 1 and "not healthy" in dead.stdout, dead.stdout

    procs["c"].send_signal(signal.SIGTERM)  # a clean stop removes the record
    procs["c"].wait(timeout=20)
    gone = poll(url, lambda d: "c" not in alive(d), 5)
    assert "c" not in alive(gone), gone

    text = command("status", "--backend", url)
    assert text.returncode == 0 and "NOT ALIVE" in text.stdout, text.stdout


@pytest.mark.parametrize("store", ["redis", "postgres"])
def test_health_and_doctor_with_the_store_down(store: str) -> None:
    scheme = "redis" if store == "redis" else "postgresql"
    url = f"{scheme}://127.0.0.1:{closed_port()}/0"
    health = command("health", "--backend", url, "--instance", "x")
    assert health.returncode == 1 and "not healthy" in health.stdout, health.stdout
    doctor = command("doctor", "--backend", url)
    assert doctor.returncode == 3, doctor.stdout + doctor.stderr
    assert doctor.stdout.startswith("FAIL  reachable"), doctor.stdout


def used(url: str) -> None:
    """Run an instance on ``url`` until it is listed (it records the store's format),
    then stop it."""
    proc = spawn(url, "only")
    try:
        poll(url, lambda d: d["instances"], 30)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=20)


def record_format(store: str, url: str, version: str) -> None:
    """Write format ``version`` where the namespace of ``url`` records its format, as
    another anarchon would have."""
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query))
    if store == "sqlite":
        with sqlite3.connect(parts.path[1:] if parts.path.startswith("//") else parts.path
                             ) as conn:
            conn.execute(f'UPDATE "{query["table"]}_meta" SET value = ? '
                         "WHERE key = 'format_version'", (version,))
    elif store in ("redis", "valkey"):
        import redis

        client = redis.Redis.from_url(urlunsplit(("redis", parts.netloc, parts.path, "", "")))
        client.hset(f"{query['prefix']}jobs", "", version)
        client.close()
    else:
        import psycopg

        base = urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f'UPDATE "{query["table"]}_meta" SET value = %s '
                         "WHERE key = 'format_version'", (version,))


@pytest.mark.parametrize("store", STORES)
def test_doctor_checks_a_store_that_is_up(store: str) -> None:
    url = store_url(store)
    used(url)
    result = command("doctor", "--backend", url, "--json")
    lines = {line["check"]: line for line in json.loads(result.stdout)}
    assert list(lines) == ["reachable", "format", "latency", "clock", "rights",
                           "instances"], lines
    for check in ("reachable", "format", "clock", "rights"):
        assert lines[check]["level"] == "OK", lines
    # the format it records, against the one this anarchon needs (the same)
    expected = {"sqlite": "1", "postgres": "1", "redis": "2", "valkey": "2"}[store]
    assert f": format {expected}; this anarchon" in lines["format"]["detail"], lines
    assert lines["format"]["detail"].endswith(f"needs format {expected}"), lines
    # no instance alive: a warning, exit 1
    assert lines["instances"]["level"] == "WARN" and result.returncode == 1, result.stdout


@pytest.mark.parametrize("store", STORES)
def test_doctor_fails_on_another_format_version(store: str) -> None:
    url = store_url(store)
    used(url)
    record_format(store, url, "7")
    result = command("doctor", "--backend", url)
    assert result.returncode == 3, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("OK    reachable"), result.stdout
    assert lines[1].startswith("FAIL  format"), result.stdout
    assert ": format 7, but this anarchon" in lines[1], lines[1]
    assert "its instances refuse this store" in lines[1], lines[1]
    assert len(lines) == 2, result.stdout  # nothing written to a store of another format


def test_doctor_warns_on_a_namespace_nothing_has_used() -> None:
    url = store_url("redis")
    result = command("doctor", "--backend", url, "--json")
    lines = {line["check"]: line for line in json.loads(result.stdout)}
    assert lines["format"]["level"] == "WARN", lines
    assert "no format recorded, nothing had used this namespace" in lines["format"]["detail"]
    assert result.returncode == 1, result.stdout


@pytest.mark.skipif(shutil.which("faketime") is None, reason="faketime not installed")
def test_doctor_fails_on_a_host_clock_off_the_stores() -> None:
    url = store_url("redis")
    env = example_env(FAKETIME="+30s", LD_PRELOAD=_libfaketime())
    result = subprocess.run([sys.executable, "-m", "anarchon", "doctor", "--backend", url],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 3, result.stdout + result.stderr
    clock = next(line for line in result.stdout.splitlines() if "clock" in line)
    assert clock.startswith("FAIL") and "+30" in clock, clock


def _libfaketime() -> str:
    for path in ("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
                 "/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1",
                 "/usr/lib/faketime/libfaketime.so.1"):
        if os.path.exists(path):
            return path
    pytest.skip("libfaketime.so.1 not found")
    raise AssertionError
