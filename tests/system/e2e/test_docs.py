"""The documentation site builds with ``mkdocs build --strict`` (broken links, bad
references and unknown API names fail it), and the commands of Getting started run as
shown."""

from __future__ import annotations

import html
import importlib.metadata
import importlib.util
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.harness.examples import ROOT, example_env, store_url

pytestmark = pytest.mark.e2e


def test_docs_build_strict(tmp_path: Path) -> None:
    for module in ("mkdocs", "material", "mkdocstrings", "mkdocstrings_handlers.python"):
        if importlib.util.find_spec(module.split(".")[0]) is None:
            pytest.skip(f"{module} is not installed (pip install -e \".[docs]\")")
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
        env={"PYTHONPATH": str(ROOT), "NO_MKDOCS_2_WARNING": "1",
             "PATH": "/usr/bin:/bin"},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    for page in ("getting-started", "concepts", "backends/redis", "guarantees",
                 "frameworks/django", "reference/core", "options", "troubleshooting",
                 "guides/detach", "guides/schedules", "runtime-control"):
        assert (tmp_path / page / "index.html").exists(), page
    reference = html.unescape(re.sub(r"<[^>]+>", "", (tmp_path / "reference" / "core" /
                                                     "index.html").read_text()))
    # signatures are formatted (ruff), private fields are hidden
    assert "Scheduler(\n    backend: Backend | None = None,\n" in reference
    assert "_detached" not in reference
    # the site works offline: no diagram waits for mermaid.js, no page loads from a CDN
    assert "Instance A" in (tmp_path / "concepts" / "index.html").read_text()
    for html_file in tmp_path.rglob("*.html"):
        text = html_file.read_text()
        assert 'class="mermaid"' not in text, html_file
        external = re.findall(r'<(?:script|link)[^>]+(?:src|href)="(https?://[^"]+)"', text)
        assert [url for url in external if "github.com" not in url] == [], (html_file, external)


# -- every shell command of getting-started.md runs as documented ---------------------------

GETTING_STARTED = ROOT / "docs" / "getting-started.md"
BLOCK = re.compile(r"```(\w*)\n(.*?)```", re.S)
SHORT = "4"  # --seconds for anything that would run until Ctrl+C


def blocks(kind: str) -> list[str]:
    return [body for lang, body in BLOCK.findall(GETTING_STARTED.read_text()) if lang == kind]


def shell_commands() -> list[list[str]]:
    commands = []
    for body in blocks("bash"):
        for line in body.splitlines():
            argv = shlex.split(line, comments=True)
            if argv:
                commands.append(argv)
    return commands


def local(argv: list[str]) -> list[str]:
    """``.venv/bin/X`` → the X of the environment running the tests."""
    head = argv[0]
    if head.startswith(".venv/bin/"):
        head = str(Path(sys.executable).parent / head.removeprefix(".venv/bin/"))
    return [head, *argv[1:]]


def with_short_seconds(argv: list[str]) -> list[str]:
    if "--seconds" in argv:
        argv = list(argv)
        argv[argv.index("--seconds") + 1] = SHORT
        return argv
    return [*argv, "--seconds", SHORT]


def run(argv: list[str], cwd: Path, env: dict[str, str],
        timeout: float = 90) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True,
                            timeout=timeout)
    assert "Traceback" not in result.stderr, f"{argv}:\n{result.stderr}"
    return result


def test_getting_started_commands_run_as_documented(tmp_path: Path) -> None:
    extras = set(importlib.metadata.metadata("anarchon").get_all("Provides-Extra") or [])
    redis = store_url("redis")
    env = example_env(REDIS_URL=redis)
    first, reader = (body for body in blocks("python"))  # the scheduler, the reader
    (tmp_path / "first.py").write_text(first)
    (tmp_path / "reader.py").write_text(reader)
    checked: list[str] = []
    for argv in shell_commands():
        text = shlex.join(argv)
        if argv[:2] == ["git", "clone"]:
            repo = yaml_value("repo_url")
            assert argv[2] == repo, f"the clone URL is not mkdocs.yml's repo_url {repo}"
        elif argv[:3] == ["python3", "-m", "venv"]:
            assert argv[3] == ".venv"
        elif argv[0] == ".venv/bin/pip":
            assert argv[1:3] == ["install", "-e"], text
            target = argv[3]
            extra = target.removeprefix(".[").removesuffix("]") if target != "." else None
            assert extra is None or set(extra.split(",")) <= extras, f"unknown extra: {text}"
        elif argv[:2] == ["bash", "scripts/quickstart.sh"]:
            script = (ROOT / "scripts" / "quickstart.sh").read_text()
            assert 'examples/quick_start.py" "$@"' in script  # the example below, as is
        elif argv[0] == ".venv/bin/python" and argv[1].startswith("examples/"):
            result = run(with_short_seconds(local(argv)), ROOT, env)
            assert result.returncode == 0, f"{text}:\n{result.stdout}{result.stderr}"
        elif argv[0] == ".venv/bin/anarchon":
            argv = [a.replace("redis://localhost:6379?prefix=cron:", redis) for a in argv]
            if "sqlite:///jobs.db" in argv:
                make_history(tmp_path, env)
            result = run(local(argv), tmp_path, env)
            assert result.returncode == 0, f"{text}:\n{result.stderr}"
            if argv[1] == "history":
                assert "success" in result.stdout, result.stdout
        else:
            pytest.fail(f"getting-started.md shows a command this test does not run: {text}")
        checked.append(text)
    assert len(checked) >= 15, checked
    ran = [text for text in checked if text.startswith((".venv/bin/python", ".venv/bin/anarchon"))]
    assert len(ran) >= 5, ran  # the examples and both anarchon commands really ran


def make_history(folder: Path, env: dict[str, str]) -> None:
    """Run the page's first scheduler (saved as first.py, as the page says) until one
    ``sync`` slot ran, stop it with Ctrl+C, then run the page's history reader."""
    if (folder / "jobs.db").exists():
        return
    proc = subprocess.Popen([sys.executable, "first.py"], cwd=folder, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    try:
        deadline = time.monotonic() + 20
        for line in proc.stdout:
            if line.startswith("slot ") or time.monotonic() > deadline:
                break
        proc.send_signal(signal.SIGINT)
        output = line + proc.communicate(timeout=30)[0]
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0 and "Traceback" not in output, output
    read = run([sys.executable, "reader.py"], folder, env)
    assert read.returncode == 0 and " success " in read.stdout, read.stdout + read.stderr


def yaml_value(key: str) -> str:
    for line in (ROOT / "mkdocs.yml").read_text().splitlines():
        if line.startswith(f"{key}:"):
            return line.split(":", 1)[1].strip()
    raise AssertionError(f"mkdocs.yml has no {key}")
