"""Report import cycles among the modules under the given folders, TYPE_CHECKING included.

Every import counts: at module level, inside a function (a lazy import only hides a
cycle) and under ``if TYPE_CHECKING:`` (a cycle of design even if never run). An import of
a package is an edge to its ``__init__``; the parents a submodule import also runs are not
counted. ``--skip FOLDER`` leaves a folder's modules out of the report (cycles whose
modules all lie in skipped folders); they stay in the graph, so a cycle that passes
through a skipped folder and comes back is still reported.

    python scripts/import_cycles.py anarchon anarchon_celery --skip anarchon/backends

Prints one line per cycle (strongly connected component of more than one module) and
exits 1 if any was found.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def modules(folders: Iterable[str], root: Path = ROOT) -> dict[str, Path]:
    """Module name -> file, for every ``.py`` under the folders (relative to ``root``)."""
    found: dict[str, Path] = {}
    for folder in folders:
        for path in sorted((root / folder).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The known modules that ``name`` imports anywhere in its file."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package
            for _ in range(node.level - 1):
                base = base.rpartition(".")[0]
            module = node.module or ""
            origin = (f"{base}.{module}" if module else base) if node.level else module
            for alias in node.names:
                sub = f"{origin}.{alias.name}"
                targets.add(sub if sub in known else origin)
    return {target for target in targets if target in known and target != name}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component: list[str] = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10 * len(graph) + 100))
    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def report(folders: Sequence[str], skip: Sequence[str] = (), root: Path = ROOT
           ) -> list[list[str]]:
    """The cycles among the folders' modules, less those lying wholly in ``skip``."""
    known = modules(folders, root)
    graph = {name: imports(name, path, known) for name, path in known.items()}
    skipped = tuple(folder.strip("/").replace("/", ".") for folder in skip)

    def left_out(module: str) -> bool:
        return any(module == s or module.startswith(s + ".") for s in skipped)

    return [c for c in cycles(graph) if not all(left_out(m) for m in c)]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="+", help="package folders, relative to the repo")
    parser.add_argument("--skip", action="append", default=[], metavar="FOLDER",
                        help="leave cycles wholly inside this folder out of the report")
    args = parser.parse_args(argv)
    found = report(args.folders, args.skip)
    for cycle in found:
        print(f"cycle of {len(cycle)}: {' -> '.join(cycle)}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
