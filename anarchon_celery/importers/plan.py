"""What the importers share: source rows, the plan against the store, the table, apply.

An importer turns each entry of another scheduler into a
[`Source`][anarchon_celery.importers.plan.Source]: the entry it becomes, or why it cannot be
carried over. [`plan()`][anarchon_celery.importers.plan.plan] compares them with what the
store holds (``add``, ``update``, ``same``, ``refused``); nothing is written unless
[`apply()`][anarchon_celery.importers.plan.apply] is called, and applying twice changes
nothing the second time.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TextIO

from anarchon.control.changes import Control, Dynamic, ScheduleSpec, check_dynamic_options
from anarchon_celery.entries.dynamic import HANDLER, EntryError
from anarchon_celery.entries.entry import Entry, _stored_versions, code_entries, core_for


@dataclass(frozen=True)
class Source:
    """One entry of the old scheduler: ``old`` describes it there; ``entry`` is what it
    becomes (``None`` with ``reason`` when it cannot be carried over)."""

    name: str
    old: str
    entry: Entry | None = None
    reason: str | None = None
    #: said in the table next to the new schedule (e.g. what changes in meaning)
    note: str = ""
    #: a one-off whose instant is computed at import (from "now"): a stored one-off of
    #: the same entry counts as the same whatever its instant (applying twice is a no-op)
    any_instant: bool = False


@dataclass(frozen=True)
class Row:
    """One line of the table: what ``--apply`` does with a source entry."""

    source: Source
    action: str  # "add" | "update" | "same" | "refused"
    new: str
    reason: str | None = None


def describe_schedule(schedule: Any) -> str:
    """A Celery schedule as the table shows it."""
    from celery.schedules import crontab, solar

    from anarchon_celery.schedules.crontab import crontab_original

    if isinstance(schedule, crontab):
        return f"crontab '{crontab_original(schedule)}'"
    if isinstance(schedule, solar):
        return f"solar {schedule.event} ({schedule.lat:g}, {schedule.lon:g})"
    if isinstance(schedule, datetime):
        return f"once at {schedule.isoformat()}"
    if hasattr(schedule, "total_seconds"):
        return f"every {schedule.total_seconds():g}s"
    return repr(schedule)


def _wanted(entry: Entry) -> tuple[Control, str]:
    """The control record ``entry.save()`` would write (without bookkeeping fields) and
    the new schedule's text."""
    arguments = entry.job_arguments()
    params = arguments.pop("params")
    arguments.pop("handler")
    schedule_keys = {k: arguments.pop(k) for k in ("every", "cron", "at", "timezone", "custom")
                     if k in arguments}
    spec = ScheduleSpec.choose(job=entry.name, **schedule_keys)
    params = json.loads(json.dumps(params))  # as the store gives it back (lists, not tuples)
    dynamic = Dynamic(HANDLER, params, check_dynamic_options(arguments, entry.name))
    return Control(paused=not entry.enabled, schedule=spec, dynamic=dynamic), spec.describe()


def _same(stored: Control, wanted: Control, any_instant: bool = False) -> bool:
    if stored.removed or stored.dynamic is None or wanted.dynamic is None:
        return False
    same_schedule = stored.schedule == wanted.schedule or (
        any_instant and stored.schedule is not None and wanted.schedule is not None
        and stored.schedule.kind == wanted.schedule.kind == "at")
    return (stored.paused == wanted.paused and same_schedule
            and stored.dynamic.handler == wanted.dynamic.handler
            and stored.dynamic.params == wanted.dynamic.params
            and dict(stored.dynamic.options) == dict(wanted.dynamic.options))


def plan(app: Any, sources: Iterable[Source]) -> list[Row]:
    """What applying ``sources`` would do, read from the store (nothing written)."""
    sources = list(sources)
    with core_for(app) as core:
        stored = _stored_versions(core)
    code = code_entries(app)
    rows = []
    for source in sources:
        if source.entry is None:
            rows.append(Row(source, "refused", "-", source.reason or "cannot be carried over"))
            continue
        if source.name in code:
            rows.append(Row(source, "refused", "-", "the app's beat_schedule defines this "
                            "name: it stays in code (the beats run it already)"))
            continue
        try:
            wanted, text = _wanted(source.entry)
        except (EntryError, TypeError, ValueError) as exc:
            rows.append(Row(source, "refused", "-", str(exc)))
            continue
        new = text + ("" if source.entry.enabled else ", paused")
        if source.note:
            new += f" ({source.note})"
        current = stored.get(source.name)
        if current is None or current[0].removed:
            rows.append(Row(source, "add", new))
        elif current[0].dynamic is None or current[0].dynamic.handler != HANDLER:
            rows.append(Row(source, "refused", "-", f"job {source.name!r} exists in the "
                            "store and is not a Celery entry"))
        elif _same(current[0], wanted, source.any_instant):
            rows.append(Row(source, "same", new))
        else:
            rows.append(Row(source, "update", new))
    return rows


def apply(rows: Sequence[Row]) -> int:
    """Save the entries of the ``add`` and ``update`` rows; returns how many."""
    done = 0
    for row in rows:
        if row.action in ("add", "update") and row.source.entry is not None:
            row.source.entry.save()
            done += 1
    return done


def print_table(rows: Sequence[Row], out: TextIO, *, applied: bool) -> None:
    """The table old -> new, then the rows that were not carried over with why."""
    header = ("name", "old", "new", "action")
    lines = [(r.source.name, r.source.old, r.new, r.action) for r in rows]
    widths = [max([len(h), *(len(line[i]) for line in lines)]) for i, h in enumerate(header)]
    widths = [min(w, 70) for w in widths]

    def show(cells: Sequence[str]) -> None:
        out.write("  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip() + "\n")

    show(header)
    show(["-" * w for w in widths])
    for line in lines:
        show(line)
    refused = [r for r in rows if r.action == "refused"]
    if refused:
        out.write("\nnot carried over:\n")
        for row in refused:
            out.write(f"  {row.source.name}: {row.reason}\n")
    counts = {a: sum(1 for r in rows if r.action == a)
              for a in ("add", "update", "same", "refused")}
    summary = ", ".join(f"{n} {a}" for a, n in counts.items())
    if applied:
        out.write(f"\napplied: {summary}\n")
    else:
        out.write(f"\ndry run ({summary}): nothing written; add --apply to write\n")


__all__ = ["Row", "Source", "apply", "describe_schedule", "plan", "print_table"]
