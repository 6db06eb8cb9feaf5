"""The situations of docs/contract.md (*Failure scenarios*), each driven with three real
instance processes.

A situation only *acts* (starts instances, sends signals, waits for log lines with
deadlines) and says which slots it expected to run and when its fault happened; the
numbers are then measured the same way for every strategy (`.measure`).
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .harness import Cluster, Records, first

LEASE, HEARTBEAT, JITTER = 2.0, 0.3, 0.2
#: a backup takes over at most ``lease + 2 * heartbeat`` after the last heartbeat
TAKEOVER_WAIT = LEASE + 2 * HEARTBEAT + 1.5
#: seconds between every instance being up and a one-off job's slot
LEAD = 1.5
INSTANCES = ("a", "b", "c")
JOB = "job"


@dataclass
class Stage:
    """What a situation did, for the measurement."""

    cluster: Cluster
    lease: bool
    expected: set[int] = field(default_factory=set)
    #: the slot a fault hit, and when (for ``takeover_delay``)
    affected: int | None = None
    fault_at: float | None = None
    #: measure the delay from here instead of ``fault_at`` (instances back up)
    delay_from: float | None = None
    notes: list[str] = field(default_factory=list)

    def begin(self, timeout: float, required: bool = True, **match: Any) -> dict[str, Any] | None:
        found: dict[str, Any] | None = self.cluster.wait_for(
            first("begin", job=JOB, **match), timeout, f"a run with {match or 'any slot'}",
            required)
        return found

    def end_of(self, run: dict[str, Any] | None, timeout: float) -> None:
        """Wait (bounded, not required) for the execution ``run`` to end."""
        if run is not None:
            self.cluster.wait_for(first("end", pid=run["pid"], slot=run["slot"],
                                        attempt=run["attempt"]), timeout, "the run's end",
                                  required=False)


@dataclass(frozen=True)
class Situation:
    """One row group of the table: what happens, the job it uses, and how to drive it."""

    key: str
    title: str
    job: Callable[[bool], dict[str, Any]]
    drive: Callable[[Stage], None]


def _at_job(duration: float) -> Callable[[bool], dict[str, Any]]:
    def make(lease: bool) -> dict[str, Any]:
        return dict(kind="at", name=JOB, when="@go", duration=duration)

    return make


def _every_job(interval: str, duration: float, **lease_options: Any
               ) -> Callable[[bool], dict[str, Any]]:
    def make(lease: bool) -> dict[str, Any]:
        return dict(kind="every", name=JOB, when=interval, duration=duration,
                    options=lease_options if lease else {})

    return make


def _sleep_until(when: float) -> None:
    delay = when - time.time()
    if delay > 0:
        time.sleep(delay)


def _slot_started_or_skipped(slot: int) -> Callable[[Records], bool]:
    def check(lines: Records) -> bool:
        return any(r.get("job") == JOB and r.get("slot") == slot and (
            r["kind"] == "begin" or (r["kind"] == "event" and r["type"] == "skip"
                                     and r["reason"] == "overlap")) for r in lines)

    return check


# -- the situations ------------------------------------------------------------------------

def long_job(st: Stage) -> None:
    """A 7 s job every 3 s: watch three slots."""
    st.cluster.start(*INSTANCES)
    b0 = st.begin(3 + JITTER + 5)
    assert b0 is not None
    s0 = b0["slot"]
    st.expected = {s0, s0 + 3000, s0 + 6000}
    st.cluster.wait_for(_slot_started_or_skipped(s0 + 6000), 8, "the third slot")
    _sleep_until(b0["t"] + 6.6)  # the first run is still going: up to three copies now


def winner_dies(st: Stage) -> None:
    """SIGKILL the runner mid-run."""
    st.cluster.start_deferred(*INSTANCES, lead=LEAD)
    b = st.begin(LEAD + 5, attempt=1)
    assert b is not None
    st.affected, st.expected = b["slot"], {b["slot"]}
    st.fault_at = st.cluster.kill(b["instance"])
    again = st.begin(TAKEOVER_WAIT, required=False, slot=b["slot"], attempt=2)
    st.end_of(again, 5)


def winner_freezes(st: Stage) -> None:
    """SIGSTOP the runner for longer than the lease, then SIGCONT it."""
    st.cluster.start_deferred(*INSTANCES, lead=LEAD)
    b = st.begin(LEAD + 5, attempt=1)
    assert b is not None
    st.affected, st.expected = b["slot"], {b["slot"]}
    st.fault_at = st.cluster.signal(b["instance"], signal.SIGSTOP)
    again = st.begin(TAKEOVER_WAIT, required=False, slot=b["slot"], attempt=2)
    _sleep_until(st.fault_at + LEASE + 0.5)
    st.cluster.signal(b["instance"], signal.SIGCONT)
    st.end_of(b, 5)
    st.end_of(again, 5)
    if st.cluster.wait_for(first("event", type="lost", pid=b["pid"]), 1.0,
                           "lost", required=False):
        st.notes.append("frozen runner emitted lost on waking")
    end = first("end", pid=b["pid"], slot=b["slot"], attempt=1)(st.cluster.records())
    if end is not None:
        st.notes.append("frozen run " + ("aborted (signal lost)" if end["signal"] == "lost"
                                         else "completed after waking"))


def non_winner_restarts(st: Stage) -> None:
    """SIGKILL and restart a backup while the runner works."""
    st.cluster.start(*INSTANCES)
    b = st.begin(3 + JITTER + 5)
    assert b is not None
    s0 = b["slot"]
    st.expected = {s0, s0 + 3000}
    victim = next(i for i in INSTANCES if i != b["instance"])
    st.cluster.kill(victim)
    st.cluster.start(victim)
    pid = st.cluster.procs[victim].pid
    nxt = st.begin(6, slot=s0 + 3000)
    st.end_of(nxt, 4)
    rejoined = st.cluster.wait_for(lambda lines: any(
        r.get("pid") == pid and r.get("slot", 0) >= s0 + 3000 and r["kind"] in ("begin", "event")
        for r in lines), 1.0, "the restarted instance", required=False)
    st.notes.append("restarted backup " + ("rejoined" if rejoined else "did not rejoin"))


def sigterm_winner(st: Stage) -> None:
    """SIGTERM the runner (graceful stop)."""
    st.cluster.start_deferred(*INSTANCES, lead=LEAD)
    b = st.begin(LEAD + 5, attempt=1)
    assert b is not None
    st.affected, st.expected = b["slot"], {b["slot"]}
    st.fault_at = st.cluster.signal(b["instance"], signal.SIGTERM)
    again = st.begin(2 * HEARTBEAT + 1.5, required=False, slot=b["slot"], attempt=2)
    st.end_of(again, 5)
    st.cluster.wait_exit(b["instance"], 8)
    end = first("end", pid=b["pid"], slot=b["slot"], attempt=1)(st.cluster.records())
    if end is not None:
        st.notes.append("stopped runner's handler " + (
            f"aborted (signal {end['signal']})" if end["aborted"] else "ran to completion"))


def all_die(st: Stage) -> None:
    """SIGKILL every instance mid-run, then start three new ones."""
    st.cluster.start_deferred(*INSTANCES, lead=LEAD)
    b = st.begin(LEAD + 5, attempt=1)
    assert b is not None
    st.affected, st.expected = b["slot"], {b["slot"]}
    st.fault_at = time.time()
    for instance in INSTANCES:
        st.cluster.kill(instance)
    st.cluster.start(*INSTANCES)
    again = st.begin(LEASE + 3, required=False, slot=b["slot"], attempt=2)
    st.end_of(again, 5)


def all_down_at_slot(st: Stage) -> None:
    """Every instance is down when a slot passes; they start again within catch_up."""
    st.cluster.start(*INSTANCES)
    done = st.cluster.wait_for(first("event", type="success", job=JOB), 3 + JITTER + 5,
                               "a first run")
    for instance in INSTANCES:
        st.cluster.kill(instance)
    st.fault_at = time.time()
    missed = done["slot"] + 3000
    while missed <= st.fault_at * 1000:
        missed += 3000
    st.affected, st.expected = missed, {missed}
    _sleep_until(missed / 1000 + JITTER + 0.3)
    st.delay_from = time.time()
    st.cluster.start(*INSTANCES)
    caught = st.begin(4, required=False, slot=missed)
    st.end_of(caught, 3)
    if caught is not None:
        st.notes.append(f"slot run on restart (reason {caught['reason']})")


SITUATIONS: tuple[Situation, ...] = (
    Situation("long-job", "a 7 s job every 3 s", _every_job("3s", 7.0), long_job),
    Situation("winner-dies", "the winner dies mid-run (SIGKILL)", _at_job(3.0), winner_dies),
    Situation("winner-freezes", "the winner freezes longer than the lease (SIGSTOP)",
              _at_job(3.0), winner_freezes),
    Situation("backup-restarts", "a non-winner restarts", _every_job("3s", 1.5),
              non_winner_restarts),
    Situation("sigterm", "SIGTERM to the winner", _at_job(3.0), sigterm_winner),
    Situation("all-die", "all three instances die mid-job", _at_job(3.0), all_die),
    Situation("all-down", "all instances are down at the slot",
              _every_job("3s", 0.3, catch_up=30), all_down_at_slot),
)
BY_KEY = {s.key: s for s in SITUATIONS}

__all__ = ["BY_KEY", "HEARTBEAT", "JITTER", "LEASE", "SITUATIONS", "Situation", "Stage"]
