"""Every fenced code block of README.md and docs/**/*.md runs as written, or says it is a
fragment.

- ``python`` blocks run as a script in a fresh temporary folder (so ``./jobs.db`` is a new
  SQLite file) with the repository importable. A block that blocks until Ctrl+C (it calls
  ``run()``, ``start_all()`` or ``asyncio.run(...)``) gets SIGINT once its SQLite file exists
  and must then stop cleanly; every other block must exit by itself. Either way: exit code
  0 and no traceback.
- ``bash`` blocks whose every line is an ``anarchon`` command run, line by line, against a
  temporary SQLite store (``ANARCHON_BACKEND``); each command must exit 0.
- ``text`` blocks are output or diagrams: never run.
- Everything else (a settings file, an excerpt that needs the page's context, a ``pip`` or
  ``systemd`` command, a transcript, SQL) carries the marker ``<!-- fragment: why -->`` on
  the line just before its fence, with the fence's indentation (an HTML comment: the
  rendered page does not show it). Inside an admonition or a tab, put a blank line between
  the two, or Markdown wraps the comment and the block in one paragraph. A ``python``
  fragment must still be valid Python.

A block that is neither runnable nor marked fails, and so does one that is marked but not
a fragment kind this test knows how to judge (an unmarked ``sql`` block, say).
"""

from __future__ import annotations

import ast
import re
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.harness.examples import ROOT, example_env

pytestmark = pytest.mark.e2e

FILES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})(?P<info>[^`\n]*)$")
MARKER = re.compile(r"^\s*<!-- fragment: \S.*-->\s*$")
NEVER_RUN = {"text"}  # output and diagrams
BLOCKS_UNTIL_CTRL_C = re.compile(r"\.run\(\)\s*(#.*)?$|\bstart_all\(\)|^asyncio\.run\(", re.M)
STOP_AFTER = 1.5  # seconds a blocking block runs after its store exists, before Ctrl+C
DEADLINE = 60.0  # for starting, and again for stopping


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  # of the opening fence, 1-based
    lang: str
    body: str
    fragment: bool

    @property
    def id(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def extract(path: Path) -> list[Block]:
    lines = path.read_text().splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if opening is None:
            i += 1
            continue
        fence, indent = opening["fence"], opening["indent"]
        closing = re.compile(rf"^\s*{re.escape(fence[0])}{{{len(fence)},}}\s*$")
        end = i + 1
        while end < len(lines) and not closing.match(lines[end]):
            end += 1
        assert end < len(lines), f"{path}:{i + 1}: the fence is never closed"
        body = "\n".join(line.removeprefix(indent) for line in lines[i + 1:end]) + "\n"
        before = lines[i - 2:i] if i > 1 else lines[:i]  # a blank line may separate them
        marked = any(MARKER.match(line) for line in before[-1:]) or (
            len(before) == 2 and not before[1].strip() and MARKER.match(before[0]) is not None)
        lang = opening["info"].strip().split(" ")[0] if opening["info"].strip() else ""
        blocks.append(Block(path, i + 1, lang, body, marked))
        i = end + 1
    return blocks


BLOCKS = [block for path in FILES for block in extract(path)]


def anarchon_lines(body: str) -> list[list[str]] | None:
    """The commands of a shell block whose every command is ``anarchon …``, else None."""
    commands = [argv for line in body.splitlines()
                if (argv := shlex.split(line, comments=True))]
    if commands and all(argv[0] == "anarchon" for argv in commands):
        return commands
    return None


def kind(block: Block) -> str:
    if block.lang in NEVER_RUN:
        return "output"
    if block.fragment:
        return "fragment"
    if block.lang == "python":
        return "python"
    if block.lang == "bash" and anarchon_lines(block.body) is not None:
        return "cli"
    return "unmarked"


def test_blocks_are_found() -> None:
    assert len(BLOCKS) > 80 and sum(b.lang == "python" for b in BLOCKS) > 50


@pytest.mark.parametrize("block", BLOCKS, ids=[block.id for block in BLOCKS])
def test_block_runs_or_is_marked(block: Block, tmp_path: Path) -> None:
    what = kind(block)
    if what == "unmarked":
        pytest.fail(f"{block.id}: a {block.lang or 'plain'} block that this test cannot run; "
                    "make it runnable, or put <!-- fragment: why --> on the line before "
                    f"its fence:\n{block.body}", pytrace=False)
    elif what == "fragment" and block.lang == "python":
        try:
            ast.parse(block.body)
        except SyntaxError as exc:
            pytest.fail(f"{block.id}: a python fragment that is not Python: {exc}")
    elif what == "python":
        run_python(block, tmp_path)
    elif what == "cli":
        run_cli(block, tmp_path)


def run_python(block: Block, folder: Path) -> None:
    (folder / "block.py").write_text(block.body)
    proc = subprocess.Popen([sys.executable, "block.py"], cwd=folder, env=example_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        if BLOCKS_UNTIL_CTRL_C.search(block.body):
            store = folder / "jobs.db"
            deadline = time.monotonic() + DEADLINE
            while not store.exists() and proc.poll() is None:
                assert time.monotonic() < deadline, f"{block.id}: no {store.name} yet"
                time.sleep(0.05)
            time.sleep(STOP_AFTER)
            assert proc.poll() is None, (f"{block.id} should run until Ctrl+C but exited "
                                         f"({proc.returncode}):\n{proc.communicate()[0]}")
            proc.send_signal(signal.SIGINT)
        output = proc.communicate(timeout=DEADLINE)[0]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0 and "Traceback" not in output, \
        f"{block.id} exited with {proc.returncode}:\n{block.body}\n---\n{output}"


def run_cli(block: Block, folder: Path) -> None:
    store = folder / "jobs.db"
    store.touch()
    env = example_env(ANARCHON_BACKEND=f"sqlite:///{store}")
    entry = Path(sys.executable).parent / "anarchon"
    for argv in anarchon_lines(block.body) or []:
        result = subprocess.run([str(entry), *argv[1:]], cwd=folder, env=env,
                                capture_output=True, text=True, timeout=DEADLINE)
        assert result.returncode == 0, f"{block.id}: {shlex.join(argv)}:\n{result.stderr}"
