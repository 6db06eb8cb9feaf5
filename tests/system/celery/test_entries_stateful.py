"""A stateful property test (``hypothesis.stateful``) over the entry/control API with two
real ``celery beat`` processes: save (add, change the interval, disable, enable), delete,
Run now, stop or kill -9 and restart a beat (each step then lets ``PAUSE`` pass), in the
orders hypothesis draws. Invariants:

* every beat stays up (unless this test stopped it);
* each entry is published at most once per slot, unless the beat that published it was
  killed (``kill -9``) before the store recorded the publish: then the documented
  takeover publishes it again as attempt 2 (at-least-once across a crash);
* no slot of an entry after its disable/delete returned (until it is enabled again);
* after a change of interval returned, only slots of the new grid;
* each Run now is published exactly once (by any beat), within a few seconds.

Bounded: ``MAX_EXAMPLES`` runs of at most ``STEPS`` steps per store, no shrinking (each
example starts real processes; a failure prints its steps).
"""

from __future__ import annotations

import signal
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from anarchon import Scheduler as CoreScheduler
from anarchon import from_url
from anarchon.errors import JobNotFoundError, TriggerRefusedError
from anarchon_celery import Entry
from tests.harness.celery.cluster import CeleryCluster, broker_available
from tests.system.celery.test_beats import SCHEDULER, record, require, store
from tests.system.celery.test_entries_journeys import PULSE, journey_app, start_beats

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, Phase, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from hypothesis.stateful import (  # noqa: E402
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

MAX_EXAMPLES = 5
STEPS = 12
#: each step then lets this much time pass (slots of the 1 s and 2 s entries run)
PAUSE = 0.7
BEATS = ("a", "b")
NAMES = tuple(f"e{i}" for i in range(6))


class EntryMachine(RuleBasedStateMachine):
    backend = "sqlite"

    def __init__(self) -> None:
        super().__init__()
        ns = "cs_" + uuid.uuid4().hex[:10]
        self.url = store(self.backend).url_for(ns)
        self.tmp = Path(tempfile.mkdtemp(prefix="anarchon-stateful-"))
        self.cluster = CeleryCluster(self.tmp, {"queue": ns, "backend": self.url,
                                                "scheduler": SCHEDULER, "entries": PULSE})
        self.app = journey_app(self.url, ns)
        self.requester = CoreScheduler(from_url(self.url))
        #: name -> (every, enabled) as stored
        self.entries: dict[str, tuple[int, bool]] = {}
        #: name -> [(from, to)]: instants whose slots must not be published
        self.off: dict[str, list[tuple[float, float]]] = {}
        #: name -> [(began, returned, every)]: from a save's return to the next save's
        #: call only slots of ``every``
        self.grid: dict[str, list[tuple[float, float, int]]] = {}
        self.triggers: Counter[str] = Counter()
        self.latencies: list[float] = []
        self.steps: Counter[str] = Counter()
        #: pids of the beats this test killed with SIGKILL
        self.killed: set[int] = set()
        start_beats(self.cluster, list(BEATS))

    @initialize(every=st.sampled_from([1, 2]))
    def two_entries(self, every: int) -> None:
        """Two entries stored while the beats run (the journeys cover stored-before)."""
        self.save(NAMES[0], every, True)
        self.save(NAMES[1], 3 - every, True)

    # -- rules ---------------------------------------------------------------------------

    @rule(name=st.sampled_from(NAMES), every=st.sampled_from([1, 2]),
          enabled=st.booleans())
    def save(self, name: str, every: int, enabled: bool) -> None:
        self.steps["save"] += 1
        was = self.entries.get(name)
        before = time.time()
        Entry(self.app, name, "t.ok", every, enabled=enabled).save()
        after = time.time()
        if enabled and (was is None or not was[1]):
            self._end_off(name, before)  # slots after this call began may run
        if not enabled and (was is None or was[1]):
            self.off.setdefault(name, []).append((after, float("inf")))
        self.grid.setdefault(name, []).append((before, after, every))
        self.entries[name] = (every, enabled)
        time.sleep(PAUSE)

    @precondition(lambda self: bool(self.entries))
    @rule(data=st.data())
    def delete(self, data: Any) -> None:
        name = data.draw(st.sampled_from(sorted(self.entries)))
        self.steps["delete"] += 1
        Entry.load(self.app, name).delete()
        after = time.time()
        if self.entries[name][1]:
            self.off.setdefault(name, []).append((after, float("inf")))
        del self.entries[name]
        time.sleep(PAUSE)

    @precondition(lambda self: any(enabled for _, enabled in self.entries.values()))
    @rule(data=st.data())
    def run_now(self, data: Any) -> None:
        name = data.draw(st.sampled_from(sorted(n for n, (_, on) in self.entries.items()
                                                if on)))
        self.steps["run_now"] += 1
        before = len(self._manual(name))
        deadline = time.monotonic() + 10
        while True:  # a just-saved entry is known once a beat registered it
            try:
                asked = time.time()
                self.requester.trigger(name)
                break
            except (JobNotFoundError, TriggerRefusedError):
                assert time.monotonic() < deadline, f"Run now of {name} kept being refused"
                time.sleep(0.2)
        self.triggers[name] += 1
        published = self.cluster.wait_for(lambda: self._manual(name)[before:], 10,
                                          f"the Run now of {name}")
        self.latencies.append(published[0]["t"] - asked)
        time.sleep(PAUSE)

    @rule(which=st.sampled_from(BEATS), hard=st.booleans())
    def restart_beat(self, which: str, hard: bool) -> None:
        self.steps["kill_restart" if hard else "stop_restart"] += 1
        proc = self.cluster.procs[which]
        if hard:
            self.killed.add(proc.pid)
        proc.send_signal(signal.SIGKILL if hard else signal.SIGTERM)
        proc.wait(30)
        assert hard or proc.returncode == 0, self.cluster.output(which)[-2000:]
        (self.tmp / f"{which}.out").rename(self.tmp / f"{which}.{time.time():.3f}.out")
        start_beats(self.cluster, [which])
        time.sleep(PAUSE)

    # -- invariants ----------------------------------------------------------------------

    @invariant()
    def every_beat_is_up(self) -> None:
        down = {n: p.returncode for n, p in self.cluster.procs.items() if p.poll() is not None}
        assert not down, {n: self.cluster.output(n)[-2000:] for n in down}

    def teardown(self) -> None:
        try:
            time.sleep(1.0)  # publishes in flight reach the log
            self.every_beat_is_up()
        finally:
            self.cluster.stop_all()
        try:
            self.check_log()
        finally:
            self.requester.close()

    def check_log(self) -> None:
        scheduled = [r for r in self.cluster.records("publish") if not r.get("manual")]
        per_slot = Counter((r["job"], r["slot"]) for r in scheduled)
        for job, slot in [k for k, n in per_slot.items() if n > 1]:
            self._published_again_after_a_kill(
                job, slot, [r for r in scheduled if (r["job"], r["slot"]) == (job, slot)])
        for name in NAMES:
            slots = sorted({r["slot"] / 1000 for r in scheduled if r["job"] == name})
            for start, end in self.off.get(name, []):
                bad = [s for s in slots if start < s <= end]
                assert not bad, f"{name}: published while disabled/deleted: {bad}"
            changes = self.grid.get(name, [])
            ends = [began for began, _, _ in changes[1:]] + [float("inf")] * bool(changes)
            for (_, start, every), end in zip(changes, ends, strict=True):
                bad = [s for s in slots if start < s <= end and s % every]
                assert not bad, f"{name}: old grid after the change to every {every}s: {bad}"
        for name, count in self.triggers.items():
            assert len(self._manual(name)) == count, (name, count, self._manual(name))
        record(f"stateful.{self.backend}.{uuid.uuid4().hex[:6]}", {
            "steps": dict(self.steps), "triggers": sum(self.triggers.values()),
            "slots": len(per_slot), "max_per_slot": max(per_slot.values(), default=0),
            "run_now_latency_max_s": round(max(self.latencies, default=0.0), 3)})

    # -- helpers -------------------------------------------------------------------------

    def _published_again_after_a_kill(self, job: str, slot: int,
                                      publishes: list[dict[str, Any]]) -> None:
        """A slot published more than once: each earlier publish came from a beat this
        test killed, the next is the following attempt (a takeover), and the store never
        recorded the earlier attempt as a success (the beat died before its finish)."""
        publishes = sorted(publishes, key=lambda r: r["attempt"])
        attempts = [r["attempt"] for r in publishes]
        assert attempts == list(range(1, len(publishes) + 1)), (job, slot, publishes)
        by_live = [r for r in publishes[:-1] if r["pid"] not in self.killed]
        assert not by_live, f"{job} slot {slot} published twice by a live beat: {publishes}"
        records = {r.attempt: r for r in self.requester.history(job, 1000) if r.slot == slot}
        for earlier in publishes[:-1]:
            stored = records.get(earlier["attempt"])
            assert stored is None or stored.status != "success", (
                f"{job} slot {slot}: attempt {earlier['attempt']} was recorded {stored} "
                f"and published again: {publishes}")
        self.steps["published_again_after_a_kill"] += 1

    def _manual(self, name: str) -> list[dict[str, Any]]:
        return [r for r in self.cluster.records("publish", job=name) if r.get("manual")]

    def _end_off(self, name: str, at: float) -> None:
        windows = self.off.get(name, [])
        if windows and windows[-1][1] == float("inf"):
            windows[-1] = (windows[-1][0], at)


@pytest.mark.parametrize("backend", ["sqlite", "redis", "postgres"])
def test_entry_api_stateful(backend: str) -> None:
    require("the Redis broker", broker_available())
    require(backend, store(backend).unavailable())
    machine = type(f"EntryMachine_{backend}", (EntryMachine,), {"backend": backend})
    run_state_machine_as_test(machine, settings=settings(
        max_examples=MAX_EXAMPLES, stateful_step_count=STEPS, deadline=None,
        database=None, phases=(Phase.explicit, Phase.reuse, Phase.generate),
        suppress_health_check=list(HealthCheck)))
