"""What a planner step of N due claims costs, batched or one claim at a time.

    python -m benchmarks.batches --backends django-sqlite,django-postgres,django-mariadb

For each store, ``--steps`` times: N jobs fall due in one slot; one instance claims them
all with one ``claim_many()`` (what the engine sends when the backend is a
``BatchStore``) and records their outcomes with one ``finish_many()``; then
the same with N ``claim()`` and N ``finish()`` calls, one after another (what it sent
before: the Django store's ORM thread runs them one at a time anyway). Between the
batched claims and finishes, one ``heartbeat()`` renews the N held runs and reads N
watched ones (the previous step's, as an instance watches the runs others won), timed
on its own. Prints the
median and p99 of a whole step in milliseconds and the median per claim, as a table,
and writes JSON with ``--json``. The ``"django"`` store on PostgreSQL and MariaDB needs
``ANARCHON_POSTGRES_URL`` / ``ANARCHON_MARIADB_URL`` (``scripts/servers.py``); a core
store is named by its URL (``sqlite:////tmp/b.db``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import time
import uuid
from typing import Any

from anarchon import from_url
from anarchon.backends.base import ClaimRequest, Finish, HeldRun, JobSpec, LeaseBackend, RunKey
from tests.harness import django_stores

from .common import percentile
from .report import Column, machine, table


def _request(name: str, slot: int) -> ClaimRequest:
    return ClaimRequest(name=name, slot=slot, owner="bench", reason="scheduled",
                        lease_ms=30_000, max_late_ms=600_000, max_attempts=3,
                        overlap="allow")


def _finish(name: str, slot: int) -> Finish:
    return Finish(name=name, slot=slot, owner="bench", attempt=1, status="success",
                  error=None, history_size=10, history_ttl_ms=None, retain_runs_ms=60_000)


async def _steps(url: str, jobs: int, steps: int) -> dict[str, list[float]]:
    backend = from_url(url)
    names = [f"job-{i}" for i in range(jobs)]
    await backend.open()
    await backend.register([JobSpec(n, "every", "every 1s") for n in names])
    base = int(time.time() * 1000) // 1000 * 1000
    samples: dict[str, list[float]] = {"batched": [], "lone": [], "heartbeat": []}
    assert isinstance(backend, LeaseBackend), url
    try:
        for step in range(steps):
            for mode in ("batched", "lone"):
                # distinct slots, all past (none early) and well within max_late
                slot = base + (2 * (step - steps) + (mode == "lone")) * 1000
                start = time.perf_counter()
                if mode == "batched":
                    answers = await backend.claim_many([_request(n, slot) for n in names])
                    won = [a for a in answers if not isinstance(a, Exception)
                           and a.outcome == "won"]
                    beat = time.perf_counter()
                    beaten = await backend.heartbeat(
                        "bench", [HeldRun(n, slot, 1) for n in names],
                        [RunKey(n, slot - 2000) for n in names], 30_000)
                    samples["heartbeat"].append(time.perf_counter() - beat)
                    if beaten.lost:
                        raise RuntimeError(f"{url}: {len(beaten.lost)} held runs lost")
                    await backend.finish_many([_finish(n, slot) for n in names])
                else:
                    won = []
                    for n in names:
                        result = await backend.claim(_request(n, slot))
                        won += [result] if result.outcome == "won" else []
                    for n in names:
                        await backend.finish(_finish(n, slot))
                # a batched step's time leaves its heartbeat out (timed on its own)
                beat_s = samples["heartbeat"][-1] if mode == "batched" else 0.0
                samples[mode].append(time.perf_counter() - start - beat_s)
                if len(won) != jobs:
                    raise RuntimeError(f"{url}: {len(won)} of {jobs} claims won in a step")
    finally:
        await backend.close()
    return samples


def measure(url: str, label: str, jobs: int, steps: int) -> dict[str, Any]:
    """One store's row: step times in milliseconds, batched and lone."""
    samples = asyncio.run(_steps(url, jobs, steps))
    row: dict[str, Any] = {"backend": label, "jobs": jobs, "steps": steps}
    for mode, values in samples.items():
        row[f"{mode}_p50_ms"] = round(statistics.median(values) * 1000, 1)
        row[f"{mode}_p99_ms"] = round(percentile(values, 0.99) * 1000, 1)
        row[f"{mode}_per_claim_ms"] = round(statistics.median(values) * 1000 / jobs, 3)
    row["speed-up"] = round(row["lone_p50_ms"] / row["batched_p50_ms"], 1)
    return row


COLUMNS: list[Column] = [
    ("backend", lambda r: r["backend"]), ("jobs", lambda r: r["jobs"]),
    ("batched p50 ms", lambda r: r["batched_p50_ms"]),
    ("batched p99 ms", lambda r: r["batched_p99_ms"]),
    ("per claim ms", lambda r: r["batched_per_claim_ms"]),
    ("one at a time p50 ms", lambda r: r["lone_p50_ms"]),
    ("one at a time p99 ms", lambda r: r["lone_p99_ms"]),
    ("per claim ms ", lambda r: r["lone_per_claim_ms"]),
    ("speed-up", lambda r: r["speed-up"]),
    ("heartbeat p50 ms", lambda r: r["heartbeat_p50_ms"]),
    ("heartbeat p99 ms", lambda r: r["heartbeat_p99_ms"])]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.batches",
                                     description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--backends", default=",".join(django_stores.STORES),
                        help="django-sqlite, django-postgres, django-mariadb or store URLs")
    parser.add_argument("--jobs", type=int, default=200, help="claims due in one step")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--json", help="write the rows here")
    args = parser.parse_args(argv)
    rows: list[dict[str, Any]] = []
    for store in args.backends.split(","):
        if store in django_stores.STORES:
            kind = store.split("-", 1)[1]
            reason = django_stores.unavailable(kind)
            if reason is not None:
                rows.append({"backend": store, "jobs": args.jobs, "error": reason})
                continue
            url = django_stores.prepare(kind, f"ba{uuid.uuid4().hex[:10]}")
        else:
            url = store
        rows.append(measure(url, store, args.jobs, args.steps))
    django_stores.drop_all()
    print(table("claims and finishes of one planner step, batched vs. one at a time",
                rows, COLUMNS))
    print(f"load average {os.getloadavg()}; {machine()}")
    if args.json:
        with open(args.json, "w") as out:
            json.dump(rows, out, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
