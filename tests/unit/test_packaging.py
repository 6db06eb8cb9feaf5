"""What the installed distribution says about itself: one version (``--version`` of both
commands, ``anarchon.__version__`` and the package metadata agree), the metadata a release
needs, extras that install from wheels, and the PostgreSQL store's install hint when its
driver is missing (the driver hidden in a child process)."""

from __future__ import annotations

import importlib.metadata
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import anarchon

BIN = Path(sys.executable).parent
ROOT = Path(__file__).resolve().parents[2]
HIDE_PSYCOPG = "import sys; sys.modules['psycopg'] = None; sys.modules['psycopg_pool'] = None\n"


def _run(args: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, timeout=60, check=False,
                          cwd=ROOT, env={**os.environ, "ANARCHON_BACKEND": ""})


@pytest.mark.parametrize("command", ["anarchon", "anarchon-dramatiq"])
def test_both_commands_print_the_one_version(command: str) -> None:
    done = _run([str(BIN / command), "--version"])
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"{command} {anarchon.__version__}"


def test_python_m_anarchon_prints_the_version() -> None:
    done = _run([sys.executable, "-m", "anarchon", "--version"])
    assert (done.returncode, done.stdout.strip()) == (0, f"anarchon {anarchon.__version__}")


def test_the_metadata_version_is_read_from_the_package() -> None:
    assert re.fullmatch(r"\d+\.\d+\.\d+\S*", anarchon.__version__)
    assert importlib.metadata.version("anarchon") == anarchon.__version__
    text = (ROOT / "pyproject.toml").read_text()
    assert 'dynamic = ["version"]' in text
    assert re.search(r"^version\s*=\s*\"", text, re.MULTILINE) is None  # no second copy
    assert 'version = { attr = "anarchon.__version__" }' in text


def test_release_metadata() -> None:
    meta = importlib.metadata.metadata("anarchon")
    classifiers = set(meta.get_all("Classifier") or [])
    for wanted in ("Framework :: Django", "Framework :: Celery", "Framework :: AsyncIO",
                   "Programming Language :: Python :: 3.10",
                   "Programming Language :: Python :: 3.13", "Typing :: Typed"):
        assert wanted in classifiers
    urls = dict(url.split(", ", 1) for url in meta.get_all("Project-URL") or [])
    assert {"Homepage", "Documentation", "Source", "Issues", "Changelog"} <= set(urls)
    assert (ROOT / "CHANGELOG.md").read_text().startswith("# Changelog")


def _extra(name: str, requires: list[str]) -> list[str]:
    """The requirements ``anarchon[name]`` pulls, self-references expanded."""
    found: list[str] = []
    for line in requires:
        requirement, _, marker = line.partition(";")
        if f'extra == "{name}"' not in marker:
            continue
        nested = re.fullmatch(r"anarchon\[([^]]+)\]", requirement.strip())
        if nested:
            for inner in nested.group(1).split(","):
                found += _extra(inner.strip(), requires)
        else:
            found.append(requirement.strip())
    return found


def test_all_needs_no_compiler_and_libraries_do_not_pin_a_binary() -> None:
    requires = importlib.metadata.requires("anarchon") or []
    everything = " ".join(_extra("all", requires)).lower()
    assert "mysqlclient" not in everything  # no Linux wheel: it compiles
    assert "pymysql" in everything
    assert "[binary]" not in " ".join(_extra("postgres", requires))
    assert any(r.startswith("psycopg[binary]") for r in _extra("postgres-binary", requires))


def test_postgres_without_its_driver_gives_the_install_hint() -> None:
    done = _run([sys.executable, "-c", HIDE_PSYCOPG + (
        "import anarchon\n"
        "for make in (lambda: anarchon.from_url('postgresql://h/db'),\n"
        "             lambda: anarchon.PostgresBackend('postgresql://h/db')):\n"
        "    try:\n"
        "        make()\n"
        "    except ImportError as exc:\n"
        "        print(exc)\n")])
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 2
    for line in lines:
        assert line.startswith('PostgresBackend needs psycopg 3: pip install "anarchon[postgres]"')
        assert "anarchon[postgres-binary]" in line


def test_the_cli_names_the_missing_postgres_driver() -> None:
    done = _run([sys.executable, "-c", HIDE_PSYCOPG + (
        "from anarchon.cli import main\n"
        "sys.exit(main(['jobs', '--backend', 'postgresql://u:secret@h/db']))\n")])
    assert done.returncode == 1
    assert "missing driver: PostgresBackend needs psycopg 3" in done.stderr
    assert "secret" not in done.stderr
    assert "Traceback" not in done.stderr
