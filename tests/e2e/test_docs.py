"""The documentation site builds with ``mkdocs build --strict`` (broken links, bad
references and unknown API names fail it)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.support import ROOT

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
                 "frameworks/django", "reference/core"):
        assert (tmp_path / page / "index.html").exists(), page
