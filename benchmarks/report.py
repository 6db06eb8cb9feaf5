"""Plain-text tables for the benchmark results, and a description of the machine."""

from __future__ import annotations

import os
import platform
import sys
from collections.abc import Callable, Sequence
from typing import Any

Column = tuple[str, Callable[[dict[str, Any]], Any]]


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 10 else f"{value:.1f}"
    return str(value)


def table(title: str, rows: Sequence[dict[str, Any]], columns: Sequence[Column]) -> str:
    """A titled, aligned text table; rows with ``error`` show it instead of values."""
    header = [name for name, _ in columns]
    body: list[list[str]] = []
    notes: list[str] = []
    for row in rows:
        if "error" in row:
            notes.append(f"  {row.get('backend', '?')}: {row['error']}")
            continue
        cells = []
        for _, get in columns:
            try:
                cells.append(_fmt(get(row)))
            except (KeyError, TypeError):
                cells.append("-")
        body.append(cells)
    widths = [max(len(h), *(len(r[i]) for r in body)) if body else len(h)
              for i, h in enumerate(header)]
    lines = [f"== {title}", "  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in body]
    return "\n".join(lines + notes)


def machine() -> dict[str, Any]:
    """What the numbers were measured on."""
    model = ""
    try:
        with open("/proc/cpuinfo") as handle:
            model = next((line.split(":", 1)[1].strip() for line in handle
                          if line.startswith("model name")), "")
    except OSError:
        pass
    memory = None
    try:
        with open("/proc/meminfo") as handle:
            memory = round(int(handle.readline().split()[1]) / 1024 / 1024, 1)
    except (OSError, ValueError, IndexError):
        pass
    return {"platform": platform.platform(), "cpu": model, "cpus": os.cpu_count(),
            "memory_gib": memory, "python": sys.version.split()[0],
            "load_average": os.getloadavg()}
