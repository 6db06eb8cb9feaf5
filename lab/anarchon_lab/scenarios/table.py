"""The scenario table as text (what ``anarchon scenarios`` prints)."""

from __future__ import annotations

from collections.abc import Sequence

from .measure import Measurement
from .situations import BY_KEY

HEADERS = ("situation", "strategy", "max concurrent", "starts/slot", "left running",
           "slots lost", "takeover delay", "notes")


def _cells(row: Measurement) -> tuple[str, ...]:
    delay = "-" if row.takeover_delay is None else f"{row.takeover_delay:.1f} s"
    notes = list(row.notes)
    if row.skipped_overlap:
        notes.insert(0, f"{row.skipped_overlap} slot(s) skipped as overlap")
    if row.lost_events:
        notes.insert(0, f"{row.lost_events} lost event(s)")
    if row.overlap_seconds:
        notes.insert(0, f"copies overlapped {row.overlap_seconds:.2f} s")
    if row.error:
        notes.append(f"ERROR: {row.error}")
    situation = BY_KEY[row.situation].title if row.situation in BY_KEY else row.situation
    return (situation, row.strategy, str(row.max_concurrent), str(row.starts_per_slot),
            str(row.left_running), str(row.slots_lost), delay, "; ".join(notes))


def render(rows: Sequence[Measurement], markdown: bool = False) -> str:
    """A plain-text (or markdown) table, one line per situation and strategy."""
    cells = [HEADERS, *(_cells(row) for row in rows)]
    if markdown:
        lines = ["| " + " | ".join(c) + " |" for c in cells]
        lines.insert(1, "|" + "|".join("---" for _ in HEADERS) + "|")
        return "\n".join(lines)
    widths = [max(len(c[i]) for c in cells) for i in range(len(HEADERS))]
    out = []
    for index, line in enumerate(cells):
        out.append("  ".join(text.ljust(width) for text, width in zip(line, widths, strict=True)
                             ).rstrip())
        if index == 0:
            out.append("  ".join("-" * width for width in widths))
    return "\n".join(out)


__all__ = ["render"]
