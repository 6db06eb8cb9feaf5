"""No import cycle among the modules of anarchon, its framework layers and the lab,
``TYPE_CHECKING`` imports included (``scripts/import_cycles.py``: every import counts, at
module level, inside a function or under ``if TYPE_CHECKING:``).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path

PACKAGES = ("anarchon", "anarchon_celery", "anarchon_django", "anarchon_dramatiq",
            "lab/anarchon_lab")
ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "import_cycles.py"

Report = Callable[..., list[list[str]]]


def _report() -> Report:
    spec = importlib.util.spec_from_file_location("import_cycles", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    found: Report = module.report
    return found


def test_the_packages_have_no_import_cycle_even_for_type_checking() -> None:
    assert all((ROOT / package / "__init__.py").is_file() for package in PACKAGES)
    assert _report()(list(PACKAGES)) == []


def test_the_check_counts_type_checking_imports(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from typing import TYPE_CHECKING\n"
                                  "if TYPE_CHECKING:\n    from .b import B\n")
    (package / "b.py").write_text("from . import a\nB = 1\n")
    report = _report()
    assert report(["pkg"], root=tmp_path) == [["pkg.a", "pkg.b"]]
    assert report(["pkg"], ["pkg"], root=tmp_path) == []
