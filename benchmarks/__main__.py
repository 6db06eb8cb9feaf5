"""Run the benchmarks: ``python -m benchmarks [--smoke] [--only ...] [--json out.json]``.

Sections: ``claims`` (claim latency vs. the store floor), ``heartbeat`` (round trips per
heartbeat with 1/100/1,000 runs in flight), ``scale`` (many jobs on three instances),
``idle`` (registered jobs with nothing due), ``handover`` (graceful stop and SIGKILL →
backup start), ``peers`` (three ``celery beat`` each of stock beat, celery-redbeat and
anarchon_celery: publishes per slot, CPU, failover after ``kill -9``), ``control``
(runtime control: change → every instance applied it, old-definition starts). Servers come
from the project's rig (``scripts/servers.py``); a store whose server cannot be had is
reported as unavailable. Prints tables, writes JSON and
exits 1 if any measurement failed.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import sys
import tempfile
import time
import traceback
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from tests.harness import django_stores, rig
from tests.harness.cleanup import cleanup

from . import claims, control, handover, heartbeat, peers, scale
from .peers import Variant
from .report import Column, machine, table

SECTIONS = ("claims", "heartbeat", "scale", "idle", "handover", "peers", "control")


@dataclass(frozen=True)
class Plan:
    """How much of each measurement to do."""

    claim_rounds: int
    claim_instances: tuple[int, ...]
    heartbeat_runs: tuple[int, ...]
    heartbeat_window: float
    heartbeat_stores: tuple[str, ...]
    scale: tuple[tuple[int, float, float], ...]  # (jobs, interval s, seconds)
    scale_stores: tuple[str, ...]
    idle_jobs: int
    idle_seconds: float
    handover: tuple[tuple[float, float, dict[str, int]], ...]  # (lease, heartbeat, trials)
    handover_stores: tuple[str, ...]
    default_lease_stores: tuple[str, ...]
    peers: tuple[Variant, ...] = ()
    peers_entries: int = 100
    peers_steady: float = 25.0  # seconds of steady state per peer before the kill
    peers_settle: float = 2.0  # seconds after every beat published, before the window
    peers_linger: float = 2.0  # seconds the beats run on after every entry was republished
    #: seconds after the kill to wait for anarchon's attempt-2 publishes (None: don't)
    peers_takeover_wait: float | None = None
    peers_parallel: bool = False  # all peers at once (shorter; CPU numbers then shared)
    #: more scale rows on one store each: (store, jobs, interval s, seconds)
    scale_extra: tuple[tuple[str, int, float, float], ...] = ()
    #: the Django store's databases that get every ``scale`` row too
    scale_django: tuple[str, ...] = ()
    #: the many-jobs idle point: (jobs, cron, seconds) on ``idle_large_stores``
    idle_large: tuple[int, str, float] | None = None
    idle_large_stores: tuple[str, ...] = ()
    #: runtime control: trials per store and wake-up mode, the instances' heartbeat
    control_trials: int = 20
    control_heartbeat: float = 1.0
    control_stores: tuple[str, ...] = rig.LEASE_STORES + django_stores.STORES


SMOKE = Plan(claim_rounds=20, claim_instances=(1, 3), heartbeat_runs=(1, 100, 1000),
             heartbeat_window=1.0, heartbeat_stores=("redis",), scale=((50, 1.0, 5.0),),
             scale_stores=("redis",), idle_jobs=1000, idle_seconds=3.0,
             handover=((2.0, 0.25, {"graceful": 2, "kill": 2}),), handover_stores=("redis",),
             default_lease_stores=(),
             # no redbeat: it is installed from PyPI on demand, which CI should not need
             peers=(Variant("stock beat", "stock"), Variant("anarchon_celery", "anarchon")),
             peers_steady=3.0, peers_settle=1.0, peers_linger=1.0, peers_parallel=True,
             # the SQL stores batch claims too: CI keeps them honest at 200 jobs/s
             scale_extra=(("postgres", 200, 1.0, 3.0), ("sqlite", 200, 1.0, 3.0)),
             # one store, one trial (about 6 s): the smoke run must stay near a minute
             control_trials=1, control_heartbeat=0.3, control_stores=("sqlite",))
FULL = Plan(claim_rounds=300, claim_instances=(1, 3), heartbeat_runs=(1, 100, 1000),
            heartbeat_window=5.0, heartbeat_stores=rig.LEASE_STORES,
            scale=((200, 1.0, 30.0), (1000, 1.0, 60.0), (10000, 10.0, 60.0)),
            scale_stores=rig.LEASE_STORES, scale_django=django_stores.STORES,
            idle_jobs=1000,
            idle_seconds=60.0,
            handover=((2.0, 0.25, {"graceful": 20, "kill": 20}),
                      (30.0, 5.0, {"graceful": 10, "kill": 2})),
            handover_stores=("sqlite", "redis", "postgres"),
            default_lease_stores=("redis", "postgres"),
            peers=(Variant("stock beat", "stock"),
                   Variant("redbeat default lock", "redbeat"),
                   Variant("redbeat lock 5 s", "redbeat", lock_timeout=5.0),
                   Variant("anarchon_celery", "anarchon")),
            peers_steady=20.0,
            peers_takeover_wait=30.0 + 5.0 + 3.0,  # anarchon's default lease + heartbeat
            # tenants-style: one daily cron per tenant
            idle_large=(100_000, "0 3 * * *", 60.0), idle_large_stores=("redis", "postgres"))


def _g(*path: str) -> Callable[[dict[str, Any]], Any]:
    def get(row: dict[str, Any]) -> Any:
        value: Any = row
        for key in path:
            value = value[key]
        return value

    return get


COLUMNS: dict[str, list[Column]] = {
    "claims": [("backend", _g("backend")), ("inst", _g("instances")),
               ("claim p50 ms", _g("claim_median_ms")), ("claim p99 ms", _g("claim_p99_ms")),
               ("floor", _g("floor")), ("floor p50 ms", _g("floor_median_ms")),
               ("floor p99 ms", _g("floor_p99_ms")), ("claim/floor", _g("ratio")),
               ("write floor", _g("write_floor")), ("wfloor p50 ms", _g("write_floor_median_ms")),
               ("wfloor p99 ms", _g("write_floor_p99_ms")), ("claim/wfloor", _g("write_ratio"))],
    "heartbeat": [("backend", _g("backend")), ("runs", _g("runs_in_flight")),
                  ("hb s", _g("heartbeat")), ("hb calls/s", _g("heartbeat_calls_per_s")),
                  ("store calls/s", _g("store_calls_per_s")),
                  ("round trips/s", _g("round_trips_per_s")),
                  ("trips/heartbeat", _g("round_trips_per_heartbeat"))],
    "scale": [("backend", _g("backend")), ("jobs", _g("jobs")), ("every s", _g("interval_s")),
              ("secs", _g("seconds")), ("started", _g("started")),
              ("expected", _g("expected")), ("late", _g("given_up_late")),
              ("overlap", _g("given_up_overlap")),
              ("unrecorded", _g("unaccounted")), ("dups", _g("duplicates")),
              ("delay p50 ms", _g("delay_after_slot_jitter", "p50_ms")),
              ("delay p99 ms", _g("delay_after_slot_jitter", "p99_ms")),
              ("p99 after draw", _g("delay_after_slot_draw", "p99_ms")),
              ("CPU % max", _g("cpu_pct_max")), ("RSS MiB max", _g("peak_rss_mib_max")),
              ("calls/s/inst", lambda r: max(i["store_calls_per_s"]
                                             for i in r["per_instance"])),
              ("store errors", lambda r: sum(i["errors"] for i in r["per_instance"])),
              ("start-up s", _g("startup_s_max"))],
    "idle": [("backend", _g("backend")), ("jobs", _g("jobs")), ("cron", _g("cron")),
             ("secs", _g("seconds")), ("start-up s", _g("startup_s_max")),
             ("CPU %", _g("cpu_pct_max")), ("RSS MiB", _g("peak_rss_mib_max")),
             ("store calls", _g("store_calls")), ("calls/s", _g("store_calls_per_s")),
             ("which", lambda r: ", ".join(f"{k} {v}" for k, v in r["calls"].items())),
             ("server cmds (shared)", _g("server_commands_in_window"))],
    "handover": [("backend", _g("backend")), ("kind", _g("kind")), ("lease s", _g("lease")),
                 ("hb s", _g("heartbeat")), ("trials", _g("trials")),
                 ("p50 ms", _g("p50_ms")), ("p99 ms", _g("p99_ms")),
                 ("max ms", _g("max_ms")), ("bound ms", _g("bound_ms"))],
    "control": [("backend", _g("backend")), ("wake-up", _g("wakeup")),
                ("change", _g("change")), ("hb s", _g("heartbeat")),
                ("trials", _g("trials")), ("p50 ms", _g("p50_ms")), ("p99 ms", _g("p99_ms")),
                ("max ms", _g("max_ms")), ("within hb", _g("within_heartbeat")),
                ("starts", _g("starts_after_first_change")),
                ("old-def starts", _g("old_definition_starts")),
                ("fenced", _g("fenced_claims"))],
    "peers": [("peer", _g("peer")), ("lock s", _g("lock_timeout_s")),
              ("secs", _g("steady_s")), ("publishes", _g("publishes")),
              ("pub/slot", _g("publishes_per_slot")), ("missed", _g("missed_slots")),
              ("dup slots", _g("duplicate_slots")),
              ("CPU % a/b/c", lambda r: "/".join(str(v) for v in r["cpu_pct"].values())),
              ("RSS MiB", _g("rss_mib_max")), ("killed", _g("victim")),
              ("gap first s", _g("failover_first_s")), ("gap p50 s", _g("failover_p50_s")),
              ("gap max s", _g("failover_max_s")),
              ("missed after kill", _g("missed_after_kill")),
              ("attempt 2 (dup)", lambda r: f"{r['late_publishes']} ({r['late_duplicates']})"
               if r["kind"] == "anarchon" else None),
              ("attempt 2 at s", _g("late_max_s"))],
}
TITLES = {
    "claims": "1. claim latency vs. store floor (N instances claim the same slot at once)",
    "heartbeat": "2. heartbeat cost, one instance (trips/heartbeat: Redis/Valkey client count)",
    "scale": "3. scale: jobs every interval on 3 instance processes "
             "(delay = handler start - (slot + the winner's claim delay); "
             "after draw: before grid rounding)",
    "idle": "4. idle cost: registered jobs, nothing due (cron once a year), default heartbeat",
    "handover": "5. hand-over (SIGTERM) and takeover (SIGKILL): signal -> backup's start",
    "peers": "6. Celery beat peers: 3 beats each, 100 entries every 1 s, one Redis; "
             "gap = kill -9 of the active beat -> the entry's next publish by another beat",
    "control": "7. runtime control, 3 instances: call returned -> the last instance applied "
               "it; starts on an old definition after the call returned (must be 0)",
}


class Runner:
    """Runs the sections of one plan and collects rows (errors become rows too)."""

    def __init__(self, plan: Plan, urls: dict[str, str], stores: tuple[str, ...],
                 workdir: Path, scale_seconds: float | None = None) -> None:
        self.plan = plan
        self.scale_seconds = scale_seconds
        self.urls = urls
        self.stores = stores
        self.workdir = workdir
        self.failed = False

    def available(self, wanted: tuple[str, ...]) -> list[str]:
        return [s for s in wanted if s in self.stores and (s == "sqlite" or s in self.urls)]

    def unavailable(self, wanted: tuple[str, ...]) -> list[dict[str, Any]]:
        return [{"backend": s, "error": "skipped: server unavailable"} for s in wanted
                if s in self.stores and s != "sqlite" and s not in self.urls]

    def attempt(self, store: str, fn: Callable[[], Any]) -> list[dict[str, Any]]:
        started = time.monotonic()
        print(f"[benchmarks]   {store} ...", file=sys.stderr, flush=True)
        try:
            result = fn()
        except Exception as exc:
            self.failed = True
            traceback.print_exc()
            return [{"backend": store, "error": f"{type(exc).__name__}: {exc}"[:500]}]
        rows = result if isinstance(result, list) else [result]
        for row in rows:
            row.setdefault("elapsed_s", round(time.monotonic() - started, 1))
        return rows

    def claims(self) -> list[dict[str, Any]]:
        rows = self.unavailable(rig.STORES)
        for store in self.available(rig.STORES):
            namespace = f"cl{int(time.time() * 1000) % 10**8}"
            url = rig.backend_url(store, self.urls.get(store), namespace, self.workdir)
            for n in self.plan.claim_instances:
                rows += self.attempt(store, partial(claims.measure, url, n,
                                                    self.plan.claim_rounds))
            asyncio.run(cleanup(store, self.urls.get(store), namespace, ["bench"]))
        return rows + self.django_claims()

    def django_stores(self, wanted: tuple[str, ...] = django_stores.STORES
                      ) -> tuple[list[str], list[dict[str, Any]]]:
        """The Django stores of ``wanted`` that can be measured here, and a skipped row
        for each of the others (their servers' URLs are passed on to django_stores)."""
        for kind, url in (("postgres", self.urls.get("postgres")),
                          ("mariadb", rig.mariadb_url())):
            if url and not os.environ.get(django_stores.VARIABLES[kind]):
                os.environ[django_stores.VARIABLES[kind]] = url
        ready, skipped = [], []
        for store in (s for s in wanted if s in self.stores):
            reason = django_stores.unavailable(store.split("-", 1)[1])
            if reason is None:
                ready.append(store)
            else:
                skipped.append({"backend": store, "error": f"skipped: {reason}"[:500]})
        return ready, skipped

    def django_claims(self) -> list[dict[str, Any]]:
        """The ORM store on each database (tests.harness.django_stores), when Django is here."""
        ready, rows = self.django_stores()
        for store in ready:
            kind = store.split("-", 1)[1]
            url = django_stores.prepare(kind, f"cl{uuid.uuid4().hex[:10]}")
            for n in self.plan.claim_instances:
                rows += self.attempt(store, partial(claims.measure, url, n,
                                                    self.plan.claim_rounds))
        django_stores.drop_all()
        return rows

    def heartbeat(self) -> list[dict[str, Any]]:
        wanted = self.plan.heartbeat_stores
        rows = self.unavailable(wanted)
        for store in self.available(wanted):
            for runs in self.plan.heartbeat_runs:
                rows += self.attempt(store, partial(
                    _run_async, heartbeat.measure, store, self.urls.get(store), self.workdir,
                    runs, self.plan.heartbeat_window))
        return rows

    def scale(self) -> list[dict[str, Any]]:
        wanted = self.plan.scale_stores
        rows = self.unavailable(wanted)
        todo = [(store, *row) for store in self.available(wanted) for row in self.plan.scale]
        todo += [row for row in self.plan.scale_extra if self.available((row[0],))]
        ready, skipped = self.django_stores(self.plan.scale_django)
        rows += skipped
        todo += [(store, *row) for store in ready for row in self.plan.scale]
        for store, jobs, interval, seconds in todo:
            if self.scale_seconds is not None:  # shorter windows, still whole intervals
                seconds = max(interval, min(seconds, self.scale_seconds // interval * interval))
            rows += self.attempt(store, partial(scale.scale, store, self.urls.get(store),
                                                self.workdir, jobs, seconds, interval))
        if ready:
            django_stores.drop_all()
        return rows

    def idle(self) -> list[dict[str, Any]]:
        # every store of the hand-over rows too: with a wake-up channel (Redis/Valkey
        # pub/sub, PostgreSQL LISTEN) idle instances poll only every 30 s; SQLite polls
        # The stores are measured side by side (one idle process each, own namespace):
        # idle processes barely compete, and the full run stays under 15 minutes.
        wanted = tuple(dict.fromkeys(self.plan.scale_stores + self.plan.handover_stores))
        rows = self.unavailable(wanted)
        stores = self.available(wanted)
        with ThreadPoolExecutor(max_workers=max(1, len(stores))) as pool:
            for result in pool.map(lambda store: self.attempt(store, partial(
                    scale.idle, store, self.urls.get(store), self.workdir,
                    self.plan.idle_jobs, self.plan.idle_seconds)), stores):
                rows += result
        if self.plan.idle_large is not None:  # one store at a time: start-up is measured
            jobs, cron, seconds = self.plan.idle_large
            rows += self.unavailable(self.plan.idle_large_stores)
            for store in self.available(self.plan.idle_large_stores):
                rows += self.attempt(store, partial(
                    scale.idle, store, self.urls.get(store), self.workdir, jobs, seconds,
                    cron=cron))
        return rows

    def handover(self) -> list[dict[str, Any]]:
        wanted = self.plan.handover_stores
        rows = self.unavailable(wanted)
        for lease, beat, trials in self.plan.handover:
            short = lease == self.plan.handover[0][0]
            for store in self.available(wanted if short else self.plan.default_lease_stores):
                rows += self.attempt(store, partial(handover.measure, store,
                                                    self.urls.get(store), self.workdir, lease,
                                                    beat, trials))
        return rows

    def control(self) -> list[dict[str, Any]]:
        wanted = tuple(s for s in self.plan.control_stores if s not in django_stores.STORES)
        rows = self.unavailable(wanted)
        for store in self.available(wanted):
            rows += self.attempt(store, partial(
                _run_async, control.measure, store, self.urls.get(store), self.workdir,
                self.plan.control_trials, self.plan.control_heartbeat))
        return rows + self.django_control()

    def django_control(self) -> list[dict[str, Any]]:
        """The ORM store on each database, in this process (tests.harness.django_stores)."""
        rows = []
        for kind, url in (("postgres", self.urls.get("postgres")),
                          ("mariadb", rig.mariadb_url())):
            if url and not os.environ.get(django_stores.VARIABLES[kind]):
                os.environ[django_stores.VARIABLES[kind]] = url
        for store in (s for s in django_stores.STORES if s in self.stores
                      and s in self.plan.control_stores):
            kind = store.split("-", 1)[1]
            reason = django_stores.unavailable(kind)
            if reason is not None:
                rows.append({"backend": store, "error": f"skipped: {reason}"[:500]})
                continue
            rows += self.attempt(store, partial(
                _run_async, control.measure_on, store,
                partial(django_stores.prepare, kind), self.plan.control_trials,
                self.plan.control_heartbeat))
        django_stores.drop_all()
        return rows

    def peers(self) -> list[dict[str, Any]]:
        broker = self.urls.get("redis")
        if "redis" not in self.stores or broker is None:
            return [{"backend": "peers", "error": "skipped: Redis (the broker) unavailable"}]
        if importlib.util.find_spec("celery") is None:
            return [{"backend": "peers", "error": "skipped: celery is not installed"}]
        runs: list[Callable[[], list[dict[str, Any]]]] = []
        skipped: list[dict[str, Any]] = []
        for variant in self.plan.peers:
            extra: Path | None = None
            if variant.kind == "redbeat":
                try:
                    extra = peers.redbeat_path()
                except Exception as exc:  # no PyPI: not a failed measurement
                    skipped.append({"backend": variant.label,
                                    "error": f"skipped: cannot install {peers.REDBEAT}: {exc}"})
                    continue
            runs.append(partial(self.attempt, variant.label, partial(
                peers.measure, variant, broker, self.workdir, entries=self.plan.peers_entries,
                steady=self.plan.peers_steady, settle=self.plan.peers_settle,
                linger=self.plan.peers_linger, takeover_wait=self.plan.peers_takeover_wait,
                extra_path=extra)))
        if self.plan.peers_parallel:
            with ThreadPoolExecutor(max(1, len(runs))) as pool:
                done = list(pool.map(lambda run: run(), runs))
        else:
            done = [run() for run in runs]
        return [row for rows in done for row in rows] + skipped


def _run_async(fn: Callable[..., Any], *args: Any) -> Any:
    return asyncio.run(fn(*args))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks",
                                     description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true",
                        help="a short run (about a minute) that proves the harness works")
    parser.add_argument("--only", default=",".join(SECTIONS),
                        help=f"comma-separated sections: {', '.join(SECTIONS)}")
    every_store = rig.STORES + django_stores.STORES
    parser.add_argument("--backends", default=",".join(every_store),
                        help=f"comma-separated stores: {', '.join(every_store)}")
    parser.add_argument("--json", type=Path, help="write the results here")
    parser.add_argument("--scale-seconds", type=float,
                        help="cap each scale row's window at this many seconds (a shorter "
                             "run on a busy machine)")
    args = parser.parse_args(argv)
    only = [s.strip() for s in args.only.split(",") if s.strip()]
    stores = tuple(s.strip() for s in args.backends.split(",") if s.strip())
    unknown = [s for s in only if s not in SECTIONS] + [s for s in stores
                                                         if s not in every_store]
    if unknown:
        parser.error(f"unknown section(s)/backend(s): {', '.join(unknown)}")
    plan = SMOKE if args.smoke else FULL
    began = time.monotonic()
    wanted_servers = tuple(s for s in rig.SERVERS if s in stores)
    urls = rig.find(wanted_servers)
    before = machine()
    results: dict[str, list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory(prefix="anarchon-bench-") as tmp:
        runner = Runner(plan, urls, stores, Path(tmp), args.scale_seconds)
        for section in only:
            print(f"[benchmarks] {section}", file=sys.stderr, flush=True)
            results[section] = getattr(runner, section)()
    after = machine()
    print()
    for section in only:
        print(table(TITLES[section], results[section], COLUMNS[section]))
        print()
    duration = round(time.monotonic() - began, 1)
    print(f"mode {'smoke' if args.smoke else 'full'}; {duration}s; {before['cpus']} CPU "
          f"({before['cpu']}); load average before {before['load_average']}, after "
          f"{after['load_average']}")
    if args.json:
        args.json.write_text(json.dumps({
            "mode": "smoke" if args.smoke else "full", "duration_s": duration,
            "machine": before, "load_average_after": after["load_average"],
            "servers": {k: v.split("@")[-1] for k, v in urls.items()},
            "results": results}, indent=2) + "\n")
        print(f"JSON written to {args.json}")
    return 1 if runner.failed else 0


if __name__ == "__main__":
    sys.exit(main())
