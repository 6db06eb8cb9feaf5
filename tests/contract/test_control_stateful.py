"""A ``hypothesis.stateful`` walk over the runtime-control API on SQLite, Redis and
PostgreSQL: add, update (``replace=True``), pause, resume, remove, re-add and trigger
dynamic jobs while running instances run them, restarting instances in between.

Each example has a store namespace of its own, three running ``Scheduler`` instances
offering the handler ``h`` (lease 2 s, heartbeat 0.3 s, no jitter) and up to three job
names, every job every 1 s. The model says which jobs exist, their params and whether
they are paused; each call's answer must match it (an existing name refused by a plain
add, a missing one by pause/remove/trigger). Invariants after every step: every instance
is up; no slot of a job ran twice; no slot due after a ``pause()``/``remove_job()``
returned ran as a scheduled slot (even one claimed late, after the next
``resume()``/``add_job()`` was called: the job runs again from its next slot), nor
started before that call (a catch-up of an instance started after it may run the
newest slot: counted as ``late_after_on``); each accepted
``trigger()`` ran exactly once. At the end every enabled job runs again (a re-added or
resumed job is not stuck).
"""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    rule,
    run_state_machine_as_test,
)

from anarchon import JobNotFoundError, RunContext, Scheduler, TriggerRefusedError, from_url
from tests.conftest import only_lease_stores
from tests.stores import StoreSpec

NAMES = ("j0", "j1", "j2")
#: the jobs each example starts with (added before the first rule)
FIRST = ("j0", "j1")
OPTIONS: dict[str, Any] = dict(lease=2, heartbeat=0.3, jitter=0)
#: a slot this close after a change's return is measured, not judged (wall clocks)
SLACK_MS = 250
#: how many examples and steps per store (bounded: under a minute per store); no
#: shrinking: a walk on real clocks does not replay exactly, and the failing walk as
#: generated is printed step by step
EXAMPLES, STEPS = 6, 20
#: what the walks did, per store (for the notes: ``-s`` prints it)
TOTALS: dict[str, dict[str, int]] = {}


@dataclass
class Run:
    instance: str
    name: str
    slot: int
    params: Any
    reason: str
    at: float


@dataclass
class Job:
    version: int
    paused: bool = False


@dataclass
class Off:
    """A span in which no slot of a job may run: from a pause/remove's return until the
    next resume/add call (``None``: still off)."""

    since_ms: int
    until_ms: int | None = None


@dataclass
class Log:
    runs: list[Run] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def handler(self, instance: str) -> Any:
        def run(ctx: RunContext) -> None:
            with self.lock:
                self.runs.append(Run(instance, ctx.name, ctx.slot, ctx.params, ctx.reason,
                                     time.time()))
        return run

    def copy(self) -> list[Run]:
        with self.lock:
            return list(self.runs)


def wait(check: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out after {timeout}s waiting for {what}"
        time.sleep(0.02)


def machine_for(spec: StoreSpec, totals: dict[str, int]) -> type[RuleBasedStateMachine]:
    class ControlWalk(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.url = spec.url_for("st_" + uuid.uuid4().hex[:12])
            self.log = Log()
            self.model: dict[str, Job] = {}
            self.off: dict[str, list[Off]] = {name: [Off(0)] for name in NAMES}
            self.triggers: dict[str, int] = dict.fromkeys(NAMES, 0)
            #: slots due while off that started only after the resume/add call
            self.late: set[tuple[str, int]] = set()
            self.version = 0
            self.started = 0
            self.control = Scheduler(from_url(self.url), instance_id="control")
            self.instances = [self._start() for _ in range(3)]
            totals["examples"] = totals.get("examples", 0) + 1

        def _start(self) -> Scheduler:
            self.started += 1
            instance_id = f"i{self.started}"
            scheduler = Scheduler(from_url(self.url), instance_id=instance_id, **OPTIONS)
            scheduler.handler("h", self.log.handler(instance_id))
            scheduler.start()
            return scheduler

        def _step(self, what: str) -> None:
            totals["steps"] = totals.get("steps", 0) + 1
            totals[what] = totals.get(what, 0) + 1

        def _on(self, name: str) -> None:
            """Slots of ``name`` may run from now (a resume/add is being called)."""
            span = self.off[name][-1]
            if span.until_ms is None:
                span.until_ms = int(time.time() * 1000)

        def _off(self, name: str) -> None:
            """No slot of ``name`` due from now may run (a pause/remove returned)."""
            if self.off[name][-1].until_ms is not None:
                self.off[name].append(Off(int(time.time() * 1000)))

        # -- rules -----------------------------------------------------------------------

        @initialize()
        def first_jobs(self) -> None:
            for name in FIRST:
                self.add(name, paused=False)

        @rule()
        def a_slot_passes(self) -> None:
            """Let time run: until an enabled job ran a slot due after now, or (none
            enabled) until the next second's slot has passed."""
            self._step("wait")
            now = time.time() * 1000
            enabled = {name for name, job in self.model.items() if not job.paused}
            if enabled:
                wait(lambda: any(r.name in enabled and r.slot > now
                                 for r in self.log.copy()), 5, "a slot of an enabled job")
            else:
                next_slot = (now // 1000 + 1) * 1000
                wait(lambda: time.time() * 1000 > next_slot + 300, 3, "a slot to pass")

        @rule(name=st.sampled_from(NAMES), paused=st.booleans())
        def add(self, name: str, paused: bool) -> None:
            self._step("add")
            self.version += 1
            if name in self.model:
                with pytest.raises(ValueError, match="exists already"):
                    self.control.add_job(name, handler="h", every="1s",
                                         params={"v": self.version}, paused=paused)
                return
            if not paused:
                self._on(name)
            change = self.control.add_job(name, handler="h", every="1s",
                                          params={"v": self.version}, paused=paused)
            assert change.action == "add"
            self.model[name] = Job(self.version, paused)

        @rule(name=st.sampled_from(NAMES))
        def update(self, name: str) -> None:
            self._step("update")
            self.version += 1
            job = self.model.get(name)
            if job is None or not job.paused:
                self._on(name)
            change = self.control.add_job(name, handler="h", every="1s",
                                          params={"v": self.version}, replace=True)
            assert change.action == ("add" if job is None else "update")
            self.model[name] = Job(self.version, job is not None and job.paused)

        @rule(name=st.sampled_from(NAMES))
        def pause(self, name: str) -> None:
            self._step("pause")
            if name not in self.model:
                with pytest.raises(JobNotFoundError):
                    self.control.pause(name)
                return
            self.control.pause(name)
            self._off(name)
            self.model[name].paused = True

        @rule(name=st.sampled_from(NAMES))
        def resume(self, name: str) -> None:
            self._step("resume")
            if name not in self.model:
                with pytest.raises(JobNotFoundError):
                    self.control.resume(name)
                return
            self._on(name)
            self.control.resume(name)
            self.model[name].paused = False

        @rule(name=st.sampled_from(NAMES))
        def remove(self, name: str) -> None:
            self._step("remove")
            if name not in self.model:
                with pytest.raises(ValueError, match="not a dynamic job"):
                    self.control.remove_job(name)
                return
            self.control.remove_job(name)
            self._off(name)
            del self.model[name]

        @rule(name=st.sampled_from(NAMES))
        def trigger(self, name: str) -> None:
            self._step("trigger")
            job = self.model.get(name)
            if job is None:
                with pytest.raises(JobNotFoundError):
                    self.control.trigger(name)
                return
            if job.paused:
                return
            before = sum(1 for r in self.log.copy() if r.name == name and r.reason == "manual")
            try:
                self.control.trigger(name)
            except TriggerRefusedError:  # the previous manual run is still recorded running
                return
            self.triggers[name] += 1
            wait(lambda: sum(1 for r in self.log.copy() if r.name == name
                             and r.reason == "manual") > before, 8, f"Run now of {name}")

        @rule(index=st.integers(0, 2))
        def restart(self, index: int) -> None:
            self._step("restart")
            self.instances[index].stop(5)
            self.instances[index] = self._start()

        # -- invariants ------------------------------------------------------------------

        @invariant()
        def every_instance_is_up(self) -> None:
            assert all(s.core.running for s in self.instances)

        @invariant()
        def each_slot_runs_at_most_once_and_never_while_off(self) -> None:
            runs = [r for r in self.log.copy() if r.reason != "manual"]
            seen: set[tuple[str, int]] = set()
            for run in runs:
                key = (run.name, run.slot)
                assert key not in seen, f"slot {run.slot} of {run.name} ran twice"
                seen.add(key)
                for span in self.off[run.name]:
                    due_while_off = run.slot >= span.since_ms + SLACK_MS and (
                        span.until_ms is None or run.slot < span.until_ms)
                    started_while_off = span.until_ms is None or \
                        run.at * 1000 < span.until_ms
                    assert not (due_while_off and (started_while_off
                                                   or run.reason == "scheduled")), (
                        f"{run.name} slot {run.slot} ({run.reason}) due while paused or "
                        f"removed ({span}) ran, started at {run.at * 1000:.0f}")
                    if due_while_off:  # a catch-up after resume/add by a new instance
                        self.late.add(key)

        @invariant()
        def each_trigger_ran_once(self) -> None:
            manual = [r.name for r in self.log.copy() if r.reason == "manual"]
            for name in NAMES:
                assert manual.count(name) <= self.triggers[name], f"{name}: an extra run"

        def teardown(self) -> None:
            try:
                now = time.time() * 1000
                for name, job in self.model.items():
                    if not job.paused:  # enabled: runs again with its newest params
                        wait(lambda name=name, job=job: any(
                            r.name == name and r.slot > now and r.params == {"v": job.version}
                            for r in self.log.copy()), 8, f"a run of enabled job {name}")
                manual = [r.name for r in self.log.copy() if r.reason == "manual"]
                assert {n: manual.count(n) for n in NAMES} == self.triggers
                self.each_slot_runs_at_most_once_and_never_while_off()
                totals["runs"] = totals.get("runs", 0) + len(self.log.copy())
                totals["late_after_on"] = totals.get("late_after_on", 0) + len(self.late)
            finally:
                for scheduler in self.instances:
                    scheduler.stop(5)
                self.control.close()

    return ControlWalk


@only_lease_stores("sqlite", "redis", "postgres")
def test_runtime_control_walk(lease_store: StoreSpec) -> None:
    totals: dict[str, int] = {}
    TOTALS[lease_store.id] = totals
    started = time.monotonic()
    run_state_machine_as_test(
        machine_for(lease_store, totals),
        settings=settings(max_examples=EXAMPLES, stateful_step_count=STEPS, deadline=None,
                          derandomize=False, database=None, phases=[Phase.generate],
                          suppress_health_check=list(HealthCheck)))
    totals["seconds"] = round(time.monotonic() - started)
    print(f"\n{lease_store.id}: {totals}")
