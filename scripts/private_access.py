"""Count reads and writes of another object's private attributes (``x._name``, x not self).

An attribute access counts when its name starts with one underscore (not a dunder) and
the object is not ``self``/``cls`` (a module's own private names, ``module._x``, count
too: they are another module's privates). Prints per-file counts and the total.

    python scripts/private_access.py anarchon anarchon_django tests
"""

from __future__ import annotations

import ast
import sys
from collections import Counter
from pathlib import Path


def accesses(path: Path) -> Counter[str]:
    """``attribute name -> count`` of the private accesses across objects in ``path``."""
    found: Counter[str] = Counter()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Attribute):
            continue
        name = node.attr
        if not name.startswith("_") or name.startswith("__"):
            continue
        if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
            continue
        found[name] += 1
    return found


def main(argv: list[str]) -> int:
    total = 0
    names: Counter[str] = Counter()
    for folder in argv or ["anarchon"]:
        for path in sorted(Path(folder).rglob("*.py")):
            counts = accesses(path)
            if counts:
                print(f"{sum(counts.values()):4d}  {path}")
                total += sum(counts.values())
                names.update(counts)
    print(f"{total:4d}  total over {len(names)} attribute names")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
