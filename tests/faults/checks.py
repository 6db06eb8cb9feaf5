"""What the fault tests assert, computed from the shared log and the store's history."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import defaultdict
from typing import Any

from anarchon import RunRecord
from anarchon.scenarios.harness import Records
from anarchon.scenarios.measure import Span, spans
from anarchon.scenarios.runner import read_history


def begins(records: Records, job: str, **match: Any) -> list[dict[str, Any]]:
    return [r for r in records if r["kind"] == "begin" and r.get("job") == job
            and all(r.get(k) == v for k, v in match.items())]


def events(records: Records, type_: str, job: str | None = None) -> list[dict[str, Any]]:
    return [r for r in records if r["kind"] == "event" and r["type"] == type_
            and (job is None or r.get("job") == job)]


def history(url: str, job: str, count: int = 1000) -> list[RunRecord]:
    return asyncio.run(read_history(url, job, count))


def concurrent_same_slot(records: Records, job: str) -> list[tuple[Span, Span]]:
    """Pairs of executions of one slot that overlapped in time (must be empty)."""
    by_slot: dict[int, list[Span]] = defaultdict(list)
    for span in spans(records, job, time.time()):
        by_slot[span.slot].append(span)
    return [(a, b) for runs in by_slot.values()
            for a, b in itertools.combinations(sorted(runs, key=lambda s: s.begin), 2)
            if b.begin < a.end]
