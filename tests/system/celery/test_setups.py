"""Ordinary Celery setups with real ``celery beat`` processes: zones, solar, a bad entry,
health fields and log lines, and a TLS broker whose settings the default store inherits.

Three beats per store (Redis, PostgreSQL), each under another ``TZ``, short leases.
Every server URL comes from ``ANARCHON_*_URL`` (through ``tests.stores`` and the
harness) or from a server the test starts itself (the TLS Redis).
"""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from celery.schedules import solar

from anarchon import from_url
from anarchon.engine.sync_scheduler import Scheduler as CoreScheduler
from tests.harness.celery.cluster import CeleryCluster, broker_available
from tests.harness.procs import ROOT
from tests.system.celery.test_beats import record, require, store

SCHEDULER = {"lease": 2.0, "heartbeat": 0.3, "jitter": 0.3}
ZONES = ("UTC", "America/New_York", "Asia/Tokyo")
SOLAR: dict[str, tuple[Any, float, float]] = {"sun": ("sunset", 52.52, 13.40),
                                              "dawn": ("dawn_civil", -33.87, 151.21)}
NEXT_RUN = re.compile(r"anarchon_celery: entry '([^']+)': (.*); next run (\S+)")


def cluster_for(tmp: Path, backend: str, **config: object) -> CeleryCluster:
    require("the Redis broker", broker_available())
    spec = store(backend)
    require(backend, spec.unavailable())
    ns = "cs_" + uuid.uuid4().hex[:10]
    return CeleryCluster(tmp, {"queue": ns, "backend": spec.url_for(ns), **config})


def exited(cluster: CeleryCluster, names: list[str]) -> bool:
    return all(cluster.procs[n].poll() is not None for n in names)


@pytest.mark.parametrize("backend", ["redis", "postgres"])
def test_beats_in_local_zones_refuse_to_start(tmp_path: Path, backend: str) -> None:
    """enable_utc=False and no timezone: each beat would follow its host's zone (09:00 in
    three zones = three instants), so every beat exits naming the settings and the fix."""
    cluster = cluster_for(tmp_path, backend, timezone=None, enable_utc=False,
                          scheduler=SCHEDULER, entries={
                              "nine": {"task": "t.ok", "crontab": {"hour": 9, "minute": 0}}})
    try:
        names = [f"b{i}" for i in range(len(ZONES))]
        for name, zone in zip(names, ZONES, strict=True):
            cluster.beat(name, env={"TZ": zone})
        cluster.wait_for(lambda: exited(cluster, names), 60, "every beat to exit")
        for name in names:
            assert cluster.procs[name].returncode != 0
            out = cluster.output(name)
            assert "enable_utc=False and no timezone" in out, out[-2000:]
            assert "set app.conf.timezone" in out
        assert not cluster.records("publish")
    finally:
        cluster.stop_all()


def expected_nine(zone: str, after: datetime) -> datetime:
    local = after.astimezone(ZoneInfo(zone))
    nine = local.replace(hour=9, minute=0, second=0, microsecond=0)
    if nine <= local:
        nine = (local + timedelta(days=1)).replace(hour=9, minute=0, second=0,
                                                   microsecond=0)
    return nine.astimezone(timezone.utc)


def next_runs(output: str) -> dict[str, datetime]:
    return {m.group(1): datetime.fromisoformat(m.group(3)) for m in NEXT_RUN.finditer(output)}


@pytest.mark.parametrize("backend", ["redis", "postgres"])
def test_three_beats_in_three_zones_agree(tmp_path: Path, backend: str) -> None:
    """Beats under TZ=UTC, America/New_York and Asia/Tokyo, app timezone Europe/Berlin and
    ``anarchon_scheduler["timezone"] = "Asia/Tokyo"``:

    * crontabs follow the scheduler's zone, or the entry's own; solar entries follow
      Celery's solar code; all three beats compute the same next runs;
    * the bad entry is logged at ERROR once per beat (entry, schedule, reason), listed as
      refused by ``anarchon jobs``, and the other entries run, each slot published once;
    * the winner logs stock beat's ``Scheduler: Sending due task tick (t.ok)``, and every
      beat's ``schedule["tick"].last_run_at`` / ``total_run_count`` follow the cluster.
    """
    entries = {
        "tick": {"task": "t.ok", "every": 1},
        "nine": {"task": "t.ok", "crontab": {"hour": 9, "minute": 0}},
        "nine_ny": {"task": "t.ok", "crontab": {"hour": 9, "minute": 0},
                    "options": {"anarchon": {"timezone": "America/New_York"}}},
        "bad": {"task": "t.ok", "crontab": {"hour": 9, "minute": 0},
                "options": {"anarchon": {"timezone": "Mars/Olympus"}}},
        **{name: {"task": "t.ok", "solar": list(spec)} for name, spec in SOLAR.items()},
    }
    cluster = cluster_for(tmp_path, backend, timezone="Europe/Berlin", entries=entries,
                          report_entries=True,
                          scheduler={**SCHEDULER, "timezone": "Asia/Tokyo"})
    names = ["a", "b", "c"]
    try:
        started = datetime.now(timezone.utc)
        for name, zone in zip(names, ZONES, strict=True):
            cluster.beat(name, env={"TZ": zone})
        cluster.wait_for(lambda: all("anarchon_celery: 6 entries" in cluster.output(n)
                                     for n in names), 60, "three beats running")
        ready = time.time()
        cluster.wait_for(lambda: len({r["slot"] for r in cluster.records("publish")
                                      if r["t"] > ready}) >= 5, 30, "five slots after start")
    finally:
        cluster.stop_all()
    outputs = {n: cluster.output(n) for n in names}
    runs = {n: next_runs(out) for n, out in outputs.items()}
    # the same next runs on every beat, whatever its TZ
    for entry in ("nine", "nine_ny", *SOLAR, "celery.backend_cleanup"):
        assert len({runs[n][entry] for n in names}) == 1, (entry, runs)
    assert runs["a"]["nine"] == expected_nine("Asia/Tokyo", started)
    assert runs["a"]["nine_ny"] == expected_nine("America/New_York", started)
    solar_error = {}
    for entry, (event, lat, lon) in SOLAR.items():
        pinned = solar(event, lat, lon, nowfun=lambda: started)
        celery_next = started + pinned.remaining_estimate(started)
        solar_error[entry] = abs((runs["a"][entry] - celery_next).total_seconds())
        assert solar_error[entry] <= 1.0, (entry, runs["a"][entry], celery_next)
    # the bad entry: one ERROR per beat start naming entry, schedule and reason
    for name, out in outputs.items():
        errors = [line for line in out.splitlines() if "beat entry 'bad'" in line]
        assert len(errors) == 1, (name, errors)
        assert "ERROR" in errors[0] and "crontab" in errors[0] and "Mars/Olympus" in errors[0]
        assert "bad" not in runs[name]
    jobs = subprocess.run([sys.executable, "-m", "anarchon", "jobs", "--backend",
                           str(cluster.config["backend"])], cwd=ROOT, capture_output=True,
                          text=True, timeout=60, check=True).stdout
    assert re.search(r"^bad\s+refused: .*Mars/Olympus", jobs, re.M), jobs
    # the other entries ran: every tick slot once, each announced with stock beat's line
    publishes = cluster.records("publish", job="tick")
    assert set(Counter(r["slot"] for r in publishes).values()) == {1}
    lines = sum(out.count("Scheduler: Sending due task tick (t.ok)") for out in outputs.values())
    assert lines == len(publishes)
    # every beat's entry followed the cluster's publishes, not only its own
    last_slot = max(r["slot"] for r in publishes)
    for name in names:
        pid = cluster.procs[name].pid
        reports = cluster.records("entry", job="tick", pid=pid)
        assert reports, name
        final = reports[-1]
        assert final["last_run_at"] is not None
        seen = datetime.fromisoformat(final["last_run_at"]).timestamp() * 1000
        assert seen >= last_slot - 2000, (name, final, last_slot)
        # every slot published once all beats ran (and a second before this beat's last
        # report), whichever beat won it: with three beats, most were won elsewhere
        after = [r for r in publishes
                 if r["slot"] >= ready * 1000 + 1000 and r["t"] < final["t"] - 1.0]
        assert final["count"] >= len(after), (name, final, len(after))
    spread = max(abs((runs[n][e] - runs["a"][e]).total_seconds())
                 for n in names for e in SOLAR)
    record(f"solar_agreement.{backend}", {"beats": 3, "max_spread_s": spread,
                                          "max_diff_from_celery_s": max(solar_error.values())})


# -- a TLS broker: the default store connects as the broker does -------------------------------

def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def tls_redis(tmp_path: Path) -> Iterator[str]:
    """A ``redis-server`` with TLS only, on a self-signed certificate made here."""
    binary = shutil.which("redis-server")
    openssl = shutil.which("openssl")
    if binary is None or openssl is None:
        require("redis-server and openssl", "not on PATH")
    assert binary is not None and openssl is not None
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run([openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=anarchon-test", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True, timeout=60)
    port = free_port()
    proc = subprocess.Popen(
        [binary, "--port", "0", "--tls-port", str(port), "--bind", "127.0.0.1",
         "--tls-cert-file", str(cert), "--tls-key-file", str(key),
         "--tls-ca-cert-file", str(cert), "--tls-auth-clients", "no", "--save", "",
         "--appendonly", "no", "--dir", str(tmp_path)],
        stdout=(tmp_path / "redis-tls.out").open("wb"), stderr=subprocess.STDOUT)
    url = f"rediss://127.0.0.1:{port}/0?ssl_cert_reqs=none"
    deadline = time.monotonic() + 15
    import redis

    while True:
        client = redis.Redis.from_url(url, socket_connect_timeout=0.5)
        try:
            if client.ping():
                break
        except redis.RedisError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError("TLS redis-server did not start: "
                                     + (tmp_path / "redis-tls.out").read_text()) from None
            time.sleep(0.1)
        finally:
            client.close()
    yield url
    proc.kill()
    proc.wait()


def test_tls_broker_with_self_signed_certificate(tmp_path: Path, tls_redis: str) -> None:
    """No ``anarchon_backend``: the store is the broker's TLS Redis, reached with the
    broker URL's ``ssl_cert_reqs=none``; three beats publish each slot once."""
    cluster = CeleryCluster(tmp_path, {"broker": tls_redis, "queue": "tls",
                                       "scheduler": SCHEDULER,
                                       "entries": {"tick": {"task": "t.ok", "every": 1}}})
    try:
        for name in ("a", "b", "c"):
            cluster.beat(name)
        cluster.wait_for(lambda: len(cluster.records("publish")) >= 4, 60, "four publishes")
    finally:
        cluster.stop_all()
    for name in ("a", "b", "c"):
        assert "CERTIFICATE_VERIFY_FAILED" not in cluster.output(name)
    publishes = cluster.records("publish")
    assert set(Counter(r["slot"] for r in publishes).values()) == {1}
    core = CoreScheduler(from_url(tls_redis, prefix="anarchon:"))
    try:
        history = core.history("tick", 50)
    finally:
        core.close()
    assert {r.slot for r in history if r.status == "success"} >= {
        r["slot"] for r in publishes[:-1]}
