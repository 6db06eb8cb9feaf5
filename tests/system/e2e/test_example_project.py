"""``example_project/`` boots: migrate, a clean ``check``, three ``anarchon run``
instances sharing the SQLite database (one killed with SIGKILL), the admin pages for
staff, the Celery and Dramatiq wiring built without a broker, and two
``anarchon-dramatiq`` schedulers on the project's own store (Redis broker)."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.harness.examples import ROOT, example_env

pytestmark = pytest.mark.e2e

PROJECT = ROOT / "example_project"


def manage(env: dict[str, str], *args: str, timeout: float = 120) -> str:
    result = subprocess.run([sys.executable, "manage.py", *args], cwd=PROJECT, env=env,
                            capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, f"manage.py {' '.join(args)}:\n{result.stdout}{result.stderr}"
    return result.stdout + result.stderr


def ticks(db: Path) -> list[tuple[int, str]]:
    with sqlite3.connect(db) as conn:
        return [(int(s), str(i)) for s, i in
                conn.execute("SELECT slot, instance FROM shop_tick ORDER BY slot")]


def wait_for_ticks(db: Path, count: int, timeout: float) -> list[tuple[int, str]]:
    deadline = time.monotonic() + timeout
    while True:
        rows = ticks(db)
        if len(rows) >= count:
            return rows
        if time.monotonic() > deadline:
            raise AssertionError(f"only {len(rows)} tick(s) after {timeout}s: {rows}")
        time.sleep(0.2)


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    pytest.importorskip("django")
    pytest.importorskip("celery")
    pytest.importorskip("dramatiq")
    return example_env(EXAMPLE_DB=str(tmp_path / "db.sqlite3"),
                       EXAMPLE_ANARCHON_SCHEDULER='{"lease": "2s", "heartbeat": "0.4s"}',
                       DJANGO_SETTINGS_MODULE="project.settings")


def test_example_project_boots_and_runs_three_instances(env: dict[str, str],
                                                        tmp_path: Path) -> None:
    db = tmp_path / "db.sqlite3"
    manage(env, "migrate", "--noinput")
    assert "System check identified no issues (0 silenced)." in manage(env, "check")

    procs = [subprocess.Popen([sys.executable, "manage.py", "anarchon", "run"], cwd=PROJECT,
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True) for _ in range(3)]
    try:
        before = wait_for_ticks(db, 2, 30)
        procs[0].kill()  # kill -9 of one instance: the other two carry on
        procs[0].wait()
        after = wait_for_ticks(db, len(before) + 2, 30)
    finally:
        for proc in procs[1:]:
            proc.send_signal(signal.SIGTERM)
        outputs = [proc.communicate(timeout=60)[0] for proc in procs]
    assert [proc.returncode for proc in procs[1:]] == [0, 0], "\n".join(outputs)
    # one row per slot (unique), and each slot succeeded exactly once in anarchon's history
    with sqlite3.connect(db) as conn:
        successes = Counter(slot for (slot,) in conn.execute(
            "SELECT slot FROM anarchon_django_store_attempt "
            "WHERE job = 'tick' AND status = 'success'"))
    assert {slot for slot, _ in after} <= set(successes), (after, successes)
    assert all(n == 1 for n in successes.values()), successes
    assert len({instance for _, instance in after}) >= 1
    assert "tick slot" in "".join(outputs)

    history = manage(env, "anarchon", "history", "tick", "--limit", "5")
    assert "success" in history, history

    manage(env, "createsuperuser", "--noinput", "--username", "admin", "--email",
           "admin@example.com")
    script = (
        "from django.contrib.auth.models import User\n"
        "u = User.objects.get(username='admin'); u.set_password('pw'); u.save()\n"
        "from django.test import Client\n"
        "anonymous = Client().get('/admin/anarchon_django/run/').status_code\n"
        "c = Client(); assert c.login(username='admin', password='pw')\n"
        "codes = [c.get(p).status_code for p in ('/admin/', '/admin/anarchon_django/run/',"
        " '/admin/anarchon_django/job/', '/admin/anarchon_django/run/?job=tick')]\n"
        "print('codes', anonymous, *codes)\n"
    )
    assert "codes 302 200 200 200 200" in manage(env, "shell", "-c", script)


def test_example_project_celery_and_dramatiq_wiring(env: dict[str, str]) -> None:
    script = (
        "from project.celery import app\n"
        "from anarchon_celery import Scheduler\n"
        "beat = Scheduler(app, lazy=True)\n"
        "print('beat', sorted(beat.anarchon.job_names))\n"
        "import shop.actors, anarchon_dramatiq as ad\n"
        "from anarchon import Scheduler as Core, SqliteBackend\n"
        "print('actors', ad.register_actors(Core(SqliteBackend(':memory:'))))\n"
    )
    output = manage(env, "shell", "-c", script)
    assert "'send-digest'" in output and "'ping'" in output, output
    assert "actors ['weekly-newsletter', 'refresh_prices']" in output, output


def test_example_project_dramatiq_schedulers_share_the_project_history(
        env: dict[str, str], tmp_path: Path) -> None:
    """``anarchon-dramatiq`` without ``--backend`` uses the project's store: its jobs are
    listed, triggered and shown by ``manage.py anarchon``, and the winner's send is
    visible at INFO with the project's LOGGING."""
    from tests.stores.redis import BASE_URL, redis_unavailable

    reason = redis_unavailable(BASE_URL, "ANARCHON_REDIS_URL")
    if reason:
        pytest.skip(reason)
    env = {**env, "REDIS_URL": BASE_URL}
    manage(env, "migrate", "--noinput")
    outputs = [tmp_path / f"s{i}.out" for i in range(2)]
    procs = []
    for out in outputs:
        with out.open("wb") as handle:
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "anarchon_dramatiq", "shop.actors", "--lease", "2",
                 "--heartbeat", "0.4", "--jitter", "0.1"], cwd=PROJECT, env=env,
                stdout=handle, stderr=subprocess.STDOUT))

    def text() -> str:
        return "".join(out.read_text(errors="replace") for out in outputs)

    try:
        _wait(lambda: text().count("scheduling weekly-newsletter, refresh_prices") == 2, 30,
              text)
        assert "refresh_prices" in manage(env, "anarchon", "list")
        manage(env, "anarchon", "trigger", "refresh_prices")
        _wait(lambda: "sent message" in text(), 30, text)
        history = manage(env, "anarchon", "history", "refresh_prices")
        assert "manual" in history and "success" in history, history
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        for proc in procs:
            proc.wait(30)
        _drop_broker_keys(BASE_URL)
    assert [proc.returncode for proc in procs] == [0, 0], text()
    assert "refresh_prices' slot" in text() and "to shop" in text()


def _wait(check: Callable[[], bool], timeout: float, tail: Callable[[], str]) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s:\n{tail()[-3000:]}")
        time.sleep(0.1)


def _drop_broker_keys(url: str) -> None:
    import redis

    client = redis.Redis.from_url(url)
    keys = list(client.scan_iter("anarchon-example-project*"))  # dramatiq_setup's namespace
    if keys:
        client.delete(*keys)
    client.close()
