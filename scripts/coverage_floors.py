"""Coverage floors of the unit + contract tests (scripts/test.sh runs them with --cov).

Reads the coverage data file ($COVERAGE_FILE, default .coverage.unit), prints the
line coverage of each guarded group of modules and of the whole product, and exits 1 if a
group is under its floor or names no measured file (a module moved: update the pattern).

    python scripts/coverage_floors.py [DATA_FILE]
"""

from __future__ import annotations

import fnmatch
import os
import sys
from pathlib import Path

from coverage.control import Coverage

ROOT = Path(__file__).resolve().parent.parent

#: group -> (patterns relative to the repository, floor in percent of lines); a floor is
#: what unit + contract measured when it was set, less a small margin
FLOORS: dict[str, tuple[tuple[str, ...], float]] = {
    # 90.8% measured (2026-12-05, unit + contract, all stores)
    "engine": (("anarchon/engine/*.py",), 88.0),
    # the pure claim rules shared by SQLite and both Django paths: 88% (15 of 17 lines)
    # measured on the SQLite claim contract alone; the Django stores run them too
    "claim rules": (("anarchon/backends/claim_rules.py",), 85.0),
}


def measure(data_file: str) -> dict[str, tuple[int, int]]:
    """Per repository-relative file: (statements, statements run)."""
    cov = Coverage(data_file=data_file)
    cov.load()
    lines: dict[str, tuple[int, int]] = {}
    for name in cov.get_data().measured_files():
        _, statements, _, missing, _ = cov.analysis2(name)
        path = Path(name).resolve()
        if path.is_relative_to(ROOT):  # another checkout's files are not this one's
            lines[path.relative_to(ROOT).as_posix()] = (len(statements),
                                                        len(statements) - len(missing))
    return lines


def percent(pairs: list[tuple[int, int]]) -> float:
    total = sum(s for s, _ in pairs)
    return 100.0 * sum(r for _, r in pairs) / total if total else 0.0


def main(argv: list[str]) -> int:
    data_file = argv[0] if argv else os.environ.get("COVERAGE_FILE", ".coverage.unit")
    lines = measure(data_file)
    print(f"[coverage] unit + contract: {percent(list(lines.values())):.1f}% of "
          f"{sum(s for s, _ in lines.values())} lines in {len(lines)} files")
    failed = False
    for group, (patterns, floor) in FLOORS.items():
        chosen = [f for f in lines if any(fnmatch.fnmatch(f, p) for p in patterns)]
        if not chosen:
            print(f"[coverage] {group}: no measured file matches {patterns}: update "
                  "scripts/coverage_floors.py", file=sys.stderr)
            failed = True
            continue
        got = percent([lines[f] for f in chosen])
        verdict = "ok" if got >= floor else f"UNDER the floor of {floor:.0f}%"
        print(f"[coverage] {group} ({len(chosen)} files): {got:.1f}% (floor {floor:.0f}%) "
              f"{verdict}")
        failed |= got < floor
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
