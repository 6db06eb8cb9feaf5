"""What observability costs (issue 35): Prometheus metrics, liveness records and
OpenTelemetry spans all on, against all off (see ``benchmarks.observed_member``).

    python -m benchmarks.metrics_cost                       # SQLite, Redis, PostgreSQL
    python -m benchmarks.metrics_cost --backends redis --rounds 3000 --jobs 1000 --repeats 5
    python -m benchmarks.metrics_cost --smoke --json out.json      # seconds (CI)

Per store:

``claim``: one process; an ``off`` and an ``on`` scheduler (never started), each on a
backend of its own, claim distinct slots of one job in blocks of `BLOCK`, alternating.
A round: the claim and the run's ``start`` event (timed: the claim latency), then the
run's finish and its ``success`` event; spans go through a simple processor (exported as
they end, so their cost falls in the round). CPU per claim: the process's CPU time over
the mode's blocks / its claims. Store calls are counted on each backend's own methods,
under the metrics' timing wrapper: **observability adds no store call per claim**, so
the calls per claim must be equal (the run exits 1 otherwise). Repeated ``--repeats``
times on fresh backends; medians reported.

``load``: a scheduler process with ``--jobs`` jobs every second (jitter 0.5 s), in each of
``--modes`` in turn (default off, metrics alone, spans alone, all on), ``--repeats`` times,
each in a fresh process: CPU % of one core, CPU ms per run, store calls per run.

``idle``: ``--idle-jobs`` jobs never due (cron once a year), default lease and heartbeat
unless ``--heartbeat``: store calls per second, off and on (one process each, side by
side: idle processes barely compete). With the liveness record an instance beats every
heartbeat while it holds nothing; without it, it does not.

Prints tables and writes JSON (``--json``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any

from anarchon import from_url
from anarchon.backends.base import ClaimRequest, Finish, JobSpec
from tests.harness import rig
from tests.harness.cleanup import cleanup

from .common import count_calls, percentile
from .observed_member import MODES, observed, tracing_on
from .report import Column, machine, table

BLOCK = 100
STORES = ("sqlite", "redis", "postgres")
#: the store calls of a run's claim and end (the others are heartbeats, polls, records)
RUN_CALLS = ("claim", "claim_many", "confirm", "finish", "finish_many", "record_skips")


async def _claim_once(url: str, rounds: int) -> dict[str, Any]:
    """One repeat of the claim section: per mode, latencies, CPU and store calls."""
    backends = {"off": from_url(url), "on": from_url(url)}
    calls = {mode: count_calls(backend, outermost=True) for mode, backend in backends.items()}
    schedulers = {mode: observed(backend, MODES[mode], instance_id=f"bench-{mode}")
                  for mode, backend in backends.items()}  # "on": the timing wrapper
    for backend in backends.values():
        await backend.open()
    name = f"obs-{uuid.uuid4().hex[:6]}"
    await backends["off"].register([JobSpec(name, "every", "every 1s")])
    for tally in calls.values():
        tally.clear()  # the claims' calls only
    base = int(time.time() * 1000) - 30_000  # within max_late, never early
    samples: dict[str, list[float]] = {"off": [], "on": []}
    cpu = {"off": 0.0, "on": 0.0}
    for block in range(0, rounds, BLOCK):
        mode = "on" if (block // BLOCK) % 2 else "off"
        backend, runtime = backends[mode], schedulers[mode].runtime
        began = time.process_time()
        for n in range(block, min(block + BLOCK, rounds)):
            request = ClaimRequest(name=name, slot=base + n, owner=f"bench-{mode}",
                                   reason="scheduled", lease_ms=30_000, max_late_ms=60_000,
                                   max_attempts=3, overlap="allow")
            start = time.perf_counter()
            result = await backend.claim(request)
            runtime.emit("start", name, request.slot, result.attempt, "scheduled")
            samples[mode].append(time.perf_counter() - start)
            await backend.finish(Finish(name, request.slot, request.owner, result.attempt,
                                        "success", None, 10, None, 60_000))
            runtime.emit("success", name, request.slot, result.attempt)
        cpu[mode] += time.process_time() - began
    for backend in backends.values():
        await backend.close()
    return {mode: {"claims": len(values), "p50_ms": percentile(values, 0.5) * 1000,
                   "p99_ms": percentile(values, 0.99) * 1000,
                   "cpu_us_per_claim": 1e6 * cpu[mode] / len(values),
                   "store_calls_per_claim": sum(calls[mode].values()) / len(values),
                   "calls": dict(calls[mode])}
            for mode, values in samples.items()}


def claim(store: str, url: str, rounds: int, repeats: int) -> dict[str, Any]:
    """The claim section on one store: medians over ``repeats``; spans counted."""
    exporter = tracing_on(batch=False)
    spans = exporter.spans
    runs = [asyncio.run(_claim_once(url, rounds)) for _ in range(repeats)]
    row: dict[str, Any] = {"backend": store, "rounds": rounds, "repeats": repeats,
                           "spans": exporter.spans - spans}
    for mode in ("off", "on"):
        for key in ("p50_ms", "p99_ms", "cpu_us_per_claim"):
            row[f"{key}_{mode}"] = round(statistics.median(r[mode][key] for r in runs), 3)
        row[f"calls_per_claim_{mode}"] = sorted({r[mode]["store_calls_per_claim"]
                                                 for r in runs})
        row[f"calls_{mode}"] = runs[-1][mode]["calls"]
    row["calls_equal"] = row["calls_per_claim_off"] == row["calls_per_claim_on"]
    row["spans_per_claim_on"] = round(row["spans"] / (repeats * runs[0]["on"]["claims"]), 3)
    return row


def _members(url: str, kind: str, modes: list[str], jobs: int, seconds: float,
             warmup: float, options: dict[str, Any]) -> list[dict[str, Any]]:
    """One fresh ``observed_member`` process per mode, side by side."""
    def one(mode: str) -> dict[str, Any]:
        config = {"url": url, "kind": kind, "mode": mode, "jobs": jobs, "seconds": seconds,
                  "warmup": warmup, "options": options}
        proc = subprocess.run([sys.executable, "-m", "benchmarks.observed_member",
                               json.dumps(config)], capture_output=True, text=True,
                              timeout=warmup + seconds + 120)
        if proc.returncode != 0:
            raise RuntimeError(f"{kind} member ({mode}) failed: {proc.stderr[-2000:]}")
        result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
        return result

    with ThreadPoolExecutor(len(modes)) as pool:
        return list(pool.map(one, modes))


def load(store: str, url: str, jobs: int, seconds: float, repeats: int,
         modes: tuple[str, ...] = ("off", "on")) -> dict[str, Any]:
    """Each mode in turn, one process at a time, ``repeats`` times; medians."""
    rows: dict[str, list[dict[str, Any]]] = {mode: [] for mode in modes}
    for _ in range(repeats):
        for mode in modes:
            (result,) = _members(url, "load", [mode], jobs, seconds, 3.0, {})
            rows[mode].append(result)
    out: dict[str, Any] = {"backend": store, "jobs": jobs, "seconds": seconds,
                           "repeats": repeats, "modes": list(modes)}
    for mode, results in rows.items():
        out[f"cpu_pct_{mode}"] = round(statistics.median(r["cpu_pct"] for r in results), 2)
        out[f"cpu_ms_per_run_{mode}"] = round(statistics.median(
            r["cpu_ms_per_run"] or 0 for r in results), 4)
        out[f"runs_per_s_{mode}"] = round(statistics.median(
            r["runs"] / r["seconds"] for r in results), 1)
        out[f"run_calls_per_run_{mode}"] = round(statistics.median(
            sum(r["calls"].get(c, 0) for c in RUN_CALLS) / max(1, r["runs"])
            for r in results), 4)
        out[f"calls_per_s_{mode}"] = round(statistics.median(
            sum(r["calls"].values()) / r["seconds"] for r in results), 2)
        out[f"late_{mode}"] = sum(r["late"] for r in results)
        out[f"errors_{mode}"] = sum(r["errors"] for r in results)
        out[f"per_repeat_{mode}"] = results
    return out


def idle(store: str, url: str, jobs: int, seconds: float,
         heartbeat: float | None) -> dict[str, Any]:
    """Off and on side by side: store calls per second by method."""
    options = {} if heartbeat is None else {"heartbeat": heartbeat,
                                            "lease": max(1.0, 4 * heartbeat)}
    off, on = _members(url, "idle", ["off", "on"], jobs, seconds, 1.0, options)
    out: dict[str, Any] = {"backend": store, "jobs": jobs, "seconds": seconds,
                           "heartbeat": heartbeat or 5.0}
    for mode, result in (("off", off), ("on", on)):
        out[f"calls_per_s_{mode}"] = round(sum(result["calls"].values()) / result["seconds"], 3)
        out[f"cpu_pct_{mode}"] = result["cpu_pct"]
        out[f"calls_{mode}"] = result["calls"]
        out[f"window_s_{mode}"] = result["seconds"]
    return out


def _pair(key: str, spec: str = "") -> Callable[[dict[str, Any]], str]:
    """A cell of a row's ``<key>_<mode>`` for each of its modes (off, on), "/" between."""
    return lambda r: " / ".join(format(r[f"{key}_{mode}"], spec)
                                for mode in r.get("modes", ("off", "on")))


COLUMNS: dict[str, list[Column]] = {
    "claim": [("backend", lambda r: r["backend"]), ("claims", lambda r: r["rounds"] // 2),
              ("reps", lambda r: r["repeats"]), ("p50 off/on ms", _pair("p50_ms", ".3f")),
              ("p99 off/on ms", _pair("p99_ms", ".3f")),
              ("CPU us/claim off/on", _pair("cpu_us_per_claim", ".0f")),
              ("calls/claim off/on", _pair("calls_per_claim")),
              ("equal", lambda r: r["calls_equal"]),
              ("spans/claim on", lambda r: r["spans_per_claim_on"])],
    "load": [("backend", lambda r: r["backend"]), ("jobs/s", lambda r: r["jobs"]),
             ("secs x reps", lambda r: f"{r['seconds']:g} x {r['repeats']}"),
             ("modes", lambda r: "/".join(r["modes"])),
             ("runs/s", _pair("runs_per_s")), ("CPU %", _pair("cpu_pct")),
             ("CPU ms/run", _pair("cpu_ms_per_run", ".3f")),
             ("run calls/run", _pair("run_calls_per_run")), ("late", _pair("late"))],
    "idle": [("backend", lambda r: r["backend"]), ("jobs", lambda r: r["jobs"]),
             ("hb s", lambda r: r["heartbeat"]), ("secs", lambda r: r["seconds"]),
             ("calls/s off", lambda r: r["calls_per_s_off"]),
             ("calls/s on", lambda r: r["calls_per_s_on"]),
             ("calls off", lambda r: r["calls_off"]), ("calls on", lambda r: r["calls_on"]),
             ("CPU % off/on", _pair("cpu_pct"))],
}
TITLES = {
    "claim": "claim: one connection per mode, claim + start event timed; calls under the "
             "metrics' wrapper (must be equal)",
    "load": "load: one scheduler process, N jobs every second, jitter 0.5 s (medians)",
    "idle": "idle: jobs never due, store calls per second (liveness off / on)",
}


def _attempt(failures: list[str], store: str, fn: Any) -> list[dict[str, Any]]:
    try:
        return [fn()]
    except Exception as exc:
        failures.append(f"{store}: {type(exc).__name__}: {exc}")
        return [{"backend": store, "error": f"{type(exc).__name__}: {exc}"[:500]}]


def run(stores: tuple[str, ...], args: argparse.Namespace,
        workdir: Path) -> tuple[dict[str, list[dict[str, Any]]], list[str]]:
    urls = rig.find(tuple(s for s in stores if s in rig.SERVERS))
    results: dict[str, list[dict[str, Any]]] = {"claim": [], "load": [], "idle": []}
    failures: list[str] = []
    for store in stores:
        if store != "sqlite" and store not in urls:
            failures.append(f"{store}: server unavailable")
            results["claim"].append({"backend": store, "error": "skipped: server unavailable"})
            continue
        namespace = f"obs{uuid.uuid4().hex[:8]}"
        url = rig.backend_url(store, urls.get(store), namespace, workdir)
        print(f"[metrics_cost] {store}", file=sys.stderr, flush=True)
        try:
            if args.rounds:
                results["claim"] += _attempt(failures, store, partial(
                    claim, store, url, args.rounds, args.repeats))
            if args.idle_seconds:
                results["idle"] += _attempt(failures, store, partial(
                    idle, store, url, args.idle_jobs, args.idle_seconds, args.heartbeat))
            if args.jobs:
                results["load"] += _attempt(failures, store, partial(
                    load, store, url, args.jobs, args.seconds, args.repeats,
                    tuple(args.modes.split(","))))
        finally:
            asyncio.run(cleanup(store, urls.get(store), namespace, []))
    for row in results["claim"]:
        if "error" not in row and not row["calls_equal"]:
            failures.append(f"{row['backend']}: observability added store calls per claim "
                            f"({row['calls_per_claim_off']} off, {row['calls_per_claim_on']} on)")
    return results, failures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.metrics_cost",
                                     description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--backends", default=",".join(STORES))
    parser.add_argument("--rounds", type=int, default=3000, help="claims per repeat, both "
                        "modes (0: no claim section)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--jobs", type=int, default=1000, help="jobs of the load section "
                        "(0: none)")
    parser.add_argument("--seconds", type=float, default=10.0, help="load window")
    parser.add_argument("--modes", default="off,metrics,spans,on",
                        help=f"load modes, in turn: {', '.join(MODES)}")
    parser.add_argument("--idle-jobs", type=int, default=1000)
    parser.add_argument("--idle-seconds", type=float, default=30.0, help="0: no idle section")
    parser.add_argument("--heartbeat", type=float, help="idle heartbeat (default: 5 s)")
    parser.add_argument("--smoke", action="store_true", help="seconds: 200 claims x 1, idle "
                        "2 s at heartbeat 0.25 s, no load")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    if args.smoke:
        args.rounds, args.repeats, args.jobs = 200, 1, 0
        args.idle_jobs, args.idle_seconds, args.heartbeat = 100, 2.0, 0.25
    stores = tuple(s.strip() for s in args.backends.split(",") if s.strip())
    before, began = machine(), time.monotonic()
    with tempfile.TemporaryDirectory(prefix="anarchon-obs-") as tmp:
        results, failures = run(stores, args, Path(tmp))
    after = machine()
    for section in ("claim", "load", "idle"):
        if results[section]:
            print(table(TITLES[section], results[section], COLUMNS[section]) + "\n")
    duration = round(time.monotonic() - began, 1)
    print(f"{duration}s; {before['cpus']} CPU ({before['cpu']}); load average before "
          f"{before['load_average']}, after {after['load_average']}")
    print("observability adds no store call per claim: "
          + ("yes" if not any("per claim" in f for f in failures) else "NO"))
    for failure in failures:
        print(f"FAILED {failure}")
    if args.json:
        args.json.write_text(json.dumps({
            "duration_s": duration, "machine": before,
            "load_average_after": after["load_average"], "failures": failures,
            "results": results}, indent=2) + "\n")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
