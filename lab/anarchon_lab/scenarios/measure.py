"""Numbers read back from what happened: handler logs, harness faults and history.

Nothing here knows which strategy ran: the same functions measure the naive claim and
the lease, so a difference in the table is a difference in behaviour.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from anarchon.history import RunRecord

from .harness import Records


@dataclass(frozen=True)
class Span:
    """One handler execution: from its ``begin`` line to its ``end`` (or its death)."""

    instance: str
    pid: int
    slot: int
    attempt: int
    begin: float
    end: float
    #: True while the handler has neither ended nor been killed
    open: bool


@dataclass
class Measurement:
    """One row of the scenario table (docs/contract.md, *Failure scenarios*, names the first
    five numbers)."""

    situation: str
    strategy: str
    backend: str
    #: the most runs of the job executing at the same instant (frozen time excluded)
    max_concurrent: int = 0
    #: the most handler starts of any one slot (attempts included)
    starts_per_slot: int = 0
    #: history records still ``running`` whose runner is dead or frozen
    left_running: int = 0
    #: expected slots with no success, nothing live and no deliberate overlap skip
    slots_lost: int = 0
    #: seconds from the fault to the next start of the affected slot (None: never)
    takeover_delay: float | None = None
    #: seconds during which two or more copies executed at once
    overlap_seconds: float = 0.0
    #: slots skipped as ``overlap`` (a deliberate, final decision)
    skipped_overlap: int = 0
    #: ``lost`` events emitted (a runner learning that a backup took over)
    lost_events: int = 0
    notes: list[str] = field(default_factory=list)
    elapsed: float = 0.0
    error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """The JSON form (``--json``)."""
        return {
            "situation": self.situation, "strategy": self.strategy, "backend": self.backend,
            "max_concurrent": self.max_concurrent, "starts_per_slot": self.starts_per_slot,
            "left_running": self.left_running, "slots_lost": self.slots_lost,
            "takeover_delay": (None if self.takeover_delay is None
                               else round(self.takeover_delay, 3)),
            "overlap_seconds": round(self.overlap_seconds, 3),
            "skipped_overlap": self.skipped_overlap, "lost_events": self.lost_events,
            "notes": list(self.notes), "elapsed": round(self.elapsed, 2), "error": self.error,
        }


def spans(records: Records, job: str, now: float) -> list[Span]:
    """Handler executions of ``job``; a killed one ends when its process was killed."""
    ends = {(r["pid"], r["slot"], r["attempt"]): r["t"] for r in records
            if r["kind"] == "end" and r.get("job") == job}
    kills = [(r["pid"], r["t"]) for r in records
             if r["kind"] == "fault" and r["signal"] == "SIGKILL"]
    out = []
    for r in records:
        if r["kind"] != "begin" or r.get("job") != job:
            continue
        key = (r["pid"], r["slot"], r["attempt"])
        end = ends.get(key)
        killed = min((t for pid, t in kills if pid == r["pid"] and t >= r["t"]), default=None)
        if end is None and killed is not None:
            end = killed
        out.append(Span(r["instance"], r["pid"], r["slot"], r["attempt"], r["t"],
                        end if end is not None else now, end is None))
    return out


def frozen_intervals(records: Records, now: float) -> dict[int, list[tuple[float, float]]]:
    """Per pid, the intervals during which it was stopped (SIGSTOP until SIGCONT/KILL)."""
    out: dict[int, list[tuple[float, float]]] = {}
    stopped: dict[int, float] = {}
    for r in records:
        if r["kind"] != "fault":
            continue
        pid = r["pid"]
        if r["signal"] == "SIGSTOP":
            stopped.setdefault(pid, r["t"])
        elif r["signal"] in ("SIGCONT", "SIGKILL") and pid in stopped:
            out.setdefault(pid, []).append((stopped.pop(pid), r["t"]))
    for pid, since in stopped.items():
        out.setdefault(pid, []).append((since, now))
    return out


def _executing(span: Span, frozen: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    pieces = [(span.begin, span.end)]
    for start, stop in frozen:
        nxt = []
        for a, b in pieces:
            if stop <= a or start >= b:
                nxt.append((a, b))
                continue
            if a < start:
                nxt.append((a, start))
            if stop < b:
                nxt.append((stop, b))
        pieces = nxt
    return pieces


def concurrency(all_spans: Iterable[Span], frozen: dict[int, list[tuple[float, float]]]
                ) -> tuple[int, float]:
    """``(max copies executing at once, seconds with two or more)``, frozen time excluded."""
    edges: list[tuple[float, int]] = []
    for span in all_spans:
        for a, b in _executing(span, frozen.get(span.pid, [])):
            if b > a:
                edges += [(a, 1), (b, -1)]
    edges.sort(key=lambda e: (e[0], e[1]))  # an end before a start at the same instant
    level = peak = 0
    overlap = 0.0
    last = None
    for t, step in edges:
        if last is not None and level >= 2:
            overlap += t - last
        level += step
        peak = max(peak, level)
        last = t
    return peak, overlap


def starts_per_slot(all_spans: Iterable[Span]) -> int:
    counts = Counter(span.slot for span in all_spans)
    return max(counts.values(), default=0)


def skipped(records: Records, job: str, reason: str = "overlap") -> set[int]:
    return {r["slot"] for r in records if r["kind"] == "event" and r["type"] == "skip"
            and r.get("job") == job and r["reason"] == reason}


def live_runs(all_spans: Iterable[Span], live_pids: set[int]) -> set[tuple[int, int]]:
    """``(slot, attempt)`` of executions still going in a live, unfrozen process."""
    return {(s.slot, s.attempt) for s in all_spans if s.open and s.pid in live_pids}


def left_running(history: Sequence[RunRecord], live: set[tuple[int, int]]) -> int:
    """History records ``running`` that no live process is executing."""
    return sum(1 for r in history
               if r.status == "running" and not r.manual and (r.slot, r.attempt) not in live)


def slots_lost(expected: Iterable[int], history: Sequence[RunRecord],
               live: set[tuple[int, int]], skipped_overlap: set[int]) -> int:
    """Expected slots with no success, no live execution and no overlap skip."""
    succeeded = {r.slot for r in history if r.status == "success" and not r.manual}
    live_slots = {slot for slot, _ in live}
    return sum(1 for slot in set(expected)
               if slot not in succeeded and slot not in live_slots and slot not in skipped_overlap)


def lost_events(records: Records, job: str) -> int:
    return sum(1 for r in records if r["kind"] == "event" and r["type"] == "lost"
               and r.get("job") == job)


__all__ = ["Measurement", "Span", "concurrency", "frozen_intervals", "left_running",
           "live_runs", "lost_events", "skipped", "slots_lost", "spans", "starts_per_slot"]
