"""A small SVG timeline of recent runs: one row per job, one bar per attempt, coloured by
the instance that ran it (so "which instance ran what" shows at a glance)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe

from anarchon import RunRecord

PALETTE = ("#417690", "#e08b2c", "#5b9a3c", "#8e5ea2", "#c0504d", "#2a9d8f", "#b08d57",
           "#6c7a89")
STATUS_STROKE = {"failure": "#ba2121", "interrupted": "#c77700", "running": "#000000",
                 "skipped": "#999999"}
LABEL_WIDTH, CHART_WIDTH, ROW_HEIGHT, TOP = 170, 760, 26, 26
LABEL_CHARS = 26  # longer job names end in "…"; the full name is the label's tooltip


def instance_colours(records: Sequence[RunRecord]) -> dict[str, str]:
    """A stable colour per instance id (by order of first appearance, oldest first)."""
    colours: dict[str, str] = {}
    for record in sorted(records, key=lambda r: r.started_at):
        if record.instance_id not in colours:
            colours[record.instance_id] = PALETTE[len(colours) % len(PALETTE)]
    return colours


def render(jobs: Sequence[str], records: Sequence[RunRecord], now: datetime | None = None,
           window: timedelta | None = None) -> SafeString:
    """The SVG (safe HTML) for ``records`` of ``jobs`` over ``window`` ending ``now``."""
    now = now or timezone.now()
    if window is None:
        oldest = min((r.started_at for r in records), default=now - timedelta(minutes=1))
        window = max(now - oldest, timedelta(seconds=10)) * 1.05
    start = now - window
    total = window.total_seconds()
    colours = instance_colours(records)

    def x(moment: datetime) -> float:
        seconds = min(max((moment - start).total_seconds(), 0.0), total)
        return LABEL_WIDTH + seconds / total * CHART_WIDTH

    height = TOP + ROW_HEIGHT * max(len(jobs), 1) + 22
    parts = [format_html(
        '<svg xmlns="http://www.w3.org/2000/svg" class="anarchon-timeline" role="img" '
        'width="{}" height="{}" viewBox="0 0 {} {}" aria-label="Recent runs by instance">',
        LABEL_WIDTH + CHART_WIDTH + 10, height, LABEL_WIDTH + CHART_WIDTH + 10, height)]
    parts.append(format_html(
        '<text class="axis" x="{}" y="14" font-size="11">{}</text>'
        '<text class="axis" x="{}" y="14" font-size="11" text-anchor="end">{}</text>',
        LABEL_WIDTH, timezone.localtime(start).strftime("%H:%M:%S"),
        LABEL_WIDTH + CHART_WIDTH, timezone.localtime(now).strftime("%H:%M:%S %Z")))
    rows = {name: index for index, name in enumerate(jobs)}
    for name, index in rows.items():
        y = TOP + index * ROW_HEIGHT
        label = name if len(name) <= LABEL_CHARS else name[:LABEL_CHARS - 1] + "…"
        parts.append(format_html(
            '<rect class="lane{}" x="{}" y="{}" width="{}" height="{}"/>'
            '<text x="4" y="{}" font-size="12" fill="currentColor">{}<title>{}</title></text>',
            " lane-odd" if index % 2 else "", LABEL_WIDTH, y, CHART_WIDTH, ROW_HEIGHT - 4,
            y + ROW_HEIGHT / 2 + 2, label, name))
    for record in records:
        if record.name not in rows or (record.finished_at or now) < start:
            continue
        y = TOP + rows[record.name] * ROW_HEIGHT + 3
        left = x(record.started_at)
        width = max(x(record.finished_at or now) - left, 3.0)
        stroke = STATUS_STROKE.get(record.status)
        title = (f"{record.name} · {record.status} · {record.reason} · attempt "
                 f"{record.attempt} · {record.instance_id} · "
                 f"{timezone.localtime(record.started_at).strftime('%H:%M:%S')}")
        parts.append(format_html(
            '<rect class="run run-{}" x="{}" y="{}" width="{}" height="{}" rx="2" '
            'fill="{}" stroke="{}" stroke-width="{}"><title>{}</title></rect>',
            record.status, f"{left:.1f}", y, f"{width:.1f}", ROW_HEIGHT - 10,
            colours[record.instance_id],
            stroke or "none", 2 if stroke else 0, title))
    legend_y = height - 6
    offset = LABEL_WIDTH
    for instance, colour in colours.items():
        parts.append(format_html(
            '<rect x="{}" y="{}" width="10" height="10" fill="{}"/>'
            '<text x="{}" y="{}" font-size="11" fill="currentColor">{}<title>{}</title></text>',
            offset, legend_y - 9, colour, offset + 14, legend_y, instance[:40], instance))
        offset += 24 + 7 * min(len(instance), 40)
    parts.append(mark_safe("</svg>"))
    return mark_safe("".join(str(part) for part in parts))  # parts are escaped


__all__ = ["instance_colours", "render"]
