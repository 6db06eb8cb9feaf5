"""Scale and idle cost: many jobs on several instance processes.

``scale``: ``jobs`` jobs ``every`` ``interval`` on ``instances`` processes for ``seconds``:
slots started / expected, duplicate starts, start delay after ``slot + jitter`` (the
claim delay the winner's engine chose: its jitter draw rounded up to the 20 ms claim
grid; also given after the raw draw), CPU seconds, peak RSS and store calls per instance.

``idle``: ``jobs`` jobs that are never due (cron once a year) for ``seconds``: CPU, RSS
and store calls issued (plus Redis ``INFO commandstats`` deltas, server-wide).
"""

from __future__ import annotations

import asyncio
import json
import math
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

from tests.harness import django_stores
from tests.harness.cleanup import cleanup
from tests.harness.procs import spawn, stop_all, wait_exit, wait_ready
from tests.harness.rig import backend_url

from .common import summary_ms
from .instrumented import commandstats, commandstats_total


def _run(store: str, base: str | None, workdir: Path, *, jobs: int, kind: str, when: str,
         seconds: float, instances: int, options: dict[str, Any],
         job_options: dict[str, Any], grace: float) -> tuple[list[dict[str, Any]], float,
                                                              int | None]:
    namespace = f"sc{uuid.uuid4().hex[:8]}"
    django: dict[str, Any] = {}
    if store in django_stores.STORES:  # the database alias travels to the members
        url = django_stores.prepare(store.split("-", 1)[1], namespace)
        django = django_stores.aliases_of(url)
    else:
        url = backend_url(store, base, namespace, workdir)
    logs = [workdir / f"{namespace}-{i}.err" for i in range(instances)]
    results = [workdir / f"{namespace}-{i}.json" for i in range(instances)]
    procs = []
    slow_stop = False
    server = base if store in ("redis", "valkey") else None
    try:
        for i in range(instances):
            procs.append(spawn("benchmarks.member", {
                "mode": "load", "store": store, "url": url, "instance": f"i{i}", "jobs": jobs,
                "kind": kind, "when": when, "options": options, "job_options": job_options,
                "result": str(results[i]), "grace": grace, "django": django}, logs[i]))
        wait_ready(procs, 60 + jobs / 100, logs)
        t0 = math.ceil(time.time()) + 1.0
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write(f"go {t0} {t0 + seconds}\n")
            proc.stdin.flush()
        stats_before = asyncio.run(commandstats(server)) if server else None
        time.sleep(max(0.0, t0 + seconds - time.time()))
        stats_after = asyncio.run(commandstats(server)) if server else None
        deadline = time.monotonic() + grace + 60
        while not all(p.exists() for p in results) and time.monotonic() < deadline:
            time.sleep(0.1)
        try:
            wait_exit(procs, 30, logs)
        except RuntimeError:
            if not all(p.exists() for p in results):
                raise
            slow_stop = True  # results are in; an overloaded member was slow to stop
    finally:
        stop_all(procs)
        if django:
            django_stores.drop(store.split("-", 1)[1], {namespace})
        else:
            asyncio.run(cleanup(store, base, namespace, [f"job-{i}" for i in range(jobs)]))
    server_ops = commandstats_total(stats_before, stats_after)
    members = [json.loads(p.read_text()) for p in results]
    for member in members:
        member["slow_stop"] = slow_stop
    return members, t0, server_ops


def _per_instance(members: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for m in members:
        calls = {k.removeprefix("call:"): v for k, v in m["counts"].items()
                 if k.startswith("call:")}
        rows.append({
            "instance": m["instance"], "cpu_s": round(m["cpu_s"], 2),
            "cpu_pct": round(100 * m["cpu_s"] / m["seconds"], 1),
            "peak_rss_mib": round(m["peak_rss_mib"], 1),
            "store_calls_per_s": round(sum(calls.values()) / m["seconds"], 2),
            "round_trips_per_s": round(m["counts"].get("round_trips", 0) / m["seconds"], 2)
            if "round_trips" in m["counts"] else None,
            "calls": calls, "errors": m["error_count"],
            "startup_s": m.get("startup_s"), "start_s": m.get("start_s"),
        })
    return rows


def scale(store: str, base: str | None, workdir: Path, jobs: int, seconds: float,
          interval: float = 1.0, instances: int = 3,
          jitter: float | None = None) -> dict[str, Any]:
    """One scale row (see module docstring); ``jitter`` defaults to half the interval."""
    if jitter is None:
        jitter = interval / 2
    members, t0, server_ops = _run(
        store, base, workdir, jobs=jobs, kind="every", when=f"{interval}s", seconds=seconds,
        instances=instances, options={}, job_options={"catch_up": 0, "jitter": jitter},
        grace=jitter + 1.5)
    per_slot: Counter[tuple[str, int]] = Counter()
    first_attempts: Counter[tuple[str, int]] = Counter()
    retries = 0
    delays: list[float] = []  # after slot + the delay the engine chose
    after_draw: list[float] = []  # after slot + the raw jitter draw (before grid rounding)
    after_slot: list[float] = []
    for m in members:
        for name, slot, attempt, t, drawn_ms, applied_ms in m["starts"]:
            per_slot[(name, slot)] += 1
            after_slot.append(t - slot / 1000)
            if attempt == 1:
                first_attempts[(name, slot)] += 1
            else:
                retries += 1
            if attempt == 1 and applied_ms is not None:
                delays.append(t - (slot + applied_ms) / 1000)
                after_draw.append(t - (slot + drawn_ms) / 1000)
    slots_per_job = len([s for s in range(int(t0 * 1000), int((t0 + seconds) * 1000),
                                          int(interval * 1000))
                         if s % int(interval * 1000) == 0]) or int(seconds / interval)
    expected = jobs * slots_per_job
    rows = _per_instance(members)
    # slots no instance started but at least one gave up (and said so), by reason
    given_up: dict[tuple[str, int], str] = {}
    for m in members:
        for name, slot, reason in m.get("given_up", []):
            if (name, slot) not in per_slot:
                given_up.setdefault((name, slot), reason)
    reasons = Counter(given_up.values())
    return {
        "backend": store, "jobs": jobs, "interval_s": interval, "seconds": seconds,
        "instances": instances, "expected": expected, "started": len(per_slot),
        "given_up_late": reasons["late"], "given_up_overlap": reasons["overlap"],
        "unaccounted": expected - len(per_slot) - len(given_up),
        "duplicates": sum(n - 1 for n in per_slot.values()),
        # two instances both started attempt 1 (a broken claim), vs. later attempts
        # (a backup took over a run whose finish never reached the store)
        "duplicate_first_attempts": sum(n - 1 for n in first_attempts.values()),
        "takeover_starts": retries,
        "delay_after_slot_jitter": summary_ms(delays),
        "delay_after_slot_draw": summary_ms(after_draw),
        "delay_after_slot": summary_ms(after_slot),
        "cpu_pct_max": max(r["cpu_pct"] for r in rows),
        "peak_rss_mib_max": max(r["peak_rss_mib"] for r in rows),
        "startup_s_max": max(r["startup_s"] or 0 for r in rows),
        "server_commands_per_s": round(server_ops / seconds, 1) if server_ops else None,
        "per_instance": rows,
        "errors": [e for m in members for e in m["errors"]][:5],
        "slow_stop": any(m["slow_stop"] for m in members),
    }


def idle(store: str, base: str | None, workdir: Path, jobs: int, seconds: float,
         instances: int = 1, cron: str = "0 0 1 1 *") -> dict[str, Any]:
    """One idle-cost row: ``jobs`` registered jobs, none due in the window (``cron``:
    once a year by default; ``"0 3 * * *"`` is the tenants-style daily job)."""
    members, _, server_ops = _run(
        store, base, workdir, jobs=jobs, kind="cron", when=cron, seconds=seconds,
        instances=instances, options={}, job_options={"catch_up": 0}, grace=0.0)
    rows = _per_instance(members)
    calls = sum(sum(r["calls"].values()) for r in rows)
    return {
        "backend": store, "jobs": jobs, "seconds": seconds, "instances": instances,
        "cron": cron, "startup_s_max": max(r["startup_s"] or 0 for r in rows),
        "cpu_pct_max": max(r["cpu_pct"] for r in rows),
        "peak_rss_mib_max": max(r["peak_rss_mib"] for r in rows),
        "store_calls": calls, "store_calls_per_s": round(calls / seconds, 3),
        "calls": dict(sum((Counter(r["calls"]) for r in rows), Counter())),
        "server_commands_in_window": server_ops,
        "per_instance": rows,
    }


