"""No module of the product is over 450 lines (the house rule: one job per module)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("anarchon", "anarchon_celery", "anarchon_django", "anarchon_dramatiq",
            "lab/anarchon_lab")
LIMIT = 450


def test_no_module_is_over_450_lines() -> None:
    sizes = {path.relative_to(ROOT).as_posix(): len(path.read_text().splitlines())
             for package in PACKAGES for path in (ROOT / package).rglob("*.py")}
    assert len(sizes) > 100  # the packages were found
    assert {path: size for path, size in sizes.items() if size > LIMIT} == {}
