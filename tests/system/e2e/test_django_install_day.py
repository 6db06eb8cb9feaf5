"""Install day: a fresh ``django-admin startproject`` with anarchon_django and one job
passes ``manage.py test`` and ``pytest`` on SQLite (the default in-memory test
database), PostgreSQL and MariaDB, and leaves no test database behind.

The project's files are in ``tests/system/e2e/install_day/*.in`` (copied into the new project:
settings tail, ``shop/jobs.py``, a ``TestCase`` and a pytest test writing through the
ORM, opening the admin history and jobs pages and POSTing Run now). The project has
Celery in the standard layout (``proj/celery.py`` with ``app.autodiscover_tasks()``, a
``shared_task`` in ``shop/tasks.py``), and both runners walk every admin control action
(``shop/walk.py``: GET Jobs, Pause, Resume, Reschedule, add/edit/delete a dynamic job and
a Celery entry of that task) in a ``TestCase``, with ``ATOMIC_REQUESTS = True`` and in a
``TransactionTestCase``, each step in seconds (a lock wait fails after 20 s, never hangs).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.stores import in_ci
from tests.stores.django_support import server_url, unavailable

pytestmark = pytest.mark.e2e

FILES = Path(__file__).with_name("install_day")
PROBLEMS = ("being accessed by other users", "database is locked", "table is locked",
            "Got an error", "Traceback")
#: wall time of each suite, printed at the end (``-s``) for the benchmarks notes
TIMES: dict[str, float] = {}


def _environment(**extra: str) -> dict[str, str]:
    """This environment without another project's ``DJANGO_SETTINGS_MODULE`` (the
    Django suite's, when both run in one pytest): the new project's ``manage.py``
    chooses its own."""
    env = {key: value for key, value in os.environ.items()
           if key != "DJANGO_SETTINGS_MODULE"}
    return {**env, "PYTHONPATH": "", **extra}


def _run(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300, check=False)


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh project ``proj`` with app ``shop``, made by Django's own commands."""
    root = tmp_path_factory.mktemp("install-day")
    env = _environment()
    made = _run([sys.executable, "-m", "django", "startproject", "proj", str(root)], root, env)
    assert made.returncode == 0, made.stderr
    app = _run([sys.executable, "manage.py", "startapp", "shop"], root, env)
    assert app.returncode == 0, app.stderr
    with open(root / "proj" / "settings.py", "a") as settings:
        settings.write("\n" + (FILES / "settings_tail.py.in").read_text())
    for name in ("jobs.py", "tests.py", "test_with_pytest.py", "tasks.py", "walk.py"):
        shutil.copy(FILES / f"{name}.in", root / "shop" / name)
    shutil.copy(FILES / "celery.py.in", root / "proj" / "celery.py")
    with open(root / "proj" / "__init__.py", "a") as package:  # Celery's documented lines
        package.write("from .celery import app as celery_app\n\n__all__ = ('celery_app',)\n")
    for name in ("conftest.py", "pytest.ini"):
        shutil.copy(FILES / f"{name}.in", root / name)
    return root


def _require(kind: str) -> None:
    reason = unavailable(kind)
    if reason is not None:
        if in_ci():
            pytest.fail(f"CI needs {kind}: {reason}", pytrace=False)
        pytest.skip(reason)


def _test_databases(kind: str, name: str) -> bool:
    """Whether the test database ``name`` exists on the server."""
    if kind == "postgres":
        import psycopg

        with psycopg.connect(server_url(kind), autocommit=True) as conn:
            return conn.execute("SELECT 1 FROM pg_database WHERE datname = %s",
                                (name,)).fetchone() is not None
    import pymysql  # type: ignore[import-untyped, unused-ignore]

    from tests.stores.django_support import server_config

    config = server_config("mariadb")
    conn = pymysql.connect(host=config["HOST"], port=int(config["PORT"] or 3306),
                           user=config["USER"], password=config["PASSWORD"])
    try:
        cursor = conn.cursor()
        cursor.execute("SELECT 1 FROM information_schema.schemata WHERE schema_name = %s",
                       (name,))
        return cursor.fetchone() is not None
    finally:
        conn.close()


@pytest.mark.parametrize("runner", ["manage.py test", "pytest"])
@pytest.mark.parametrize("kind", ["sqlite", "postgres", "mariadb"])
def test_the_fresh_projects_suite_passes(project: Path, kind: str, runner: str) -> None:
    _require(kind)
    test_db = "test_installday_" + uuid.uuid4().hex[:10]
    env = _environment(INSTALL_DAY_DB=kind, INSTALL_DAY_TEST_DB=test_db,
                       INSTALL_DAY_URL="" if kind == "sqlite" else server_url(kind))
    args = ([sys.executable, "manage.py", "test", "--noinput", "-v", "2"]
            if runner == "manage.py test" else [sys.executable, "-m", "pytest", "-q"])
    started = time.monotonic()
    done = _run(args, project, env)
    TIMES[f"{kind} {runner}"] = time.monotonic() - started
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert ("OK" in output) if runner == "manage.py test" else (" passed" in output), output
    if runner == "manage.py test":
        assert "Ran 4 tests" in output, output
    else:
        assert "7 passed" in output, output
    for problem in PROBLEMS:
        assert problem not in output, output
    if kind != "sqlite":
        assert not _test_databases(kind, test_db), f"test database {test_db} left behind"
    print(f"\n[install-day] {kind} {runner}: {TIMES[f'{kind} {runner}']:.1f} s")
