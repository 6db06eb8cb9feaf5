"""Connection churn is not an outage (issue 34, item 3).

Three instances (lease 2 s, heartbeat 0.3 s, jitter 0.2 s) run a job every second while
a thread terminates every connection the instances hold, every 0.5-1 s (uniform), for
``CHURN`` seconds: PostgreSQL ``pg_terminate_backend`` of the backends whose
``application_name`` is this test's own (no other backend of the shared server is
touched), Redis ``CLIENT KILL ID`` of this test's own clients (``client_name``).

What users rely on (docs/guarantees.md, "connection churn"): a dropped connection is
replaced and the call sent again, so at least 90 % of the slots start exactly once, none
starts twice, and none starts later than a quarter lease + jitter after its slot.
"""

from __future__ import annotations

import random
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import pytest

from tests.conftest import STORES, _require
from tests.harness.cluster import Cluster
from tests.harness.faults import INSTANCES, JITTER, LEASE, begins, duplicates, make_workers, tick

#: how long connections are killed, and the pause between two kills (seconds)
CHURN = 30.0
PAUSE = (0.2, 1.0)
#: what the docs promise under churn
MIN_STARTED = 0.9
MAX_LATE_S = LEASE / 4 + JITTER


def _with_query(url: str, **params: str) -> str:
    parts = urlsplit(url)
    query = [*parse_qsl(parts.query), *params.items()]
    return urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode(query), ""))


def _postgres(namespace: str, app: str) -> tuple[str, Callable[[], int], Callable[[], None]]:
    import psycopg

    spec = next(s for s in STORES if s.id == "postgres")
    _require(spec)
    url = _with_query(spec.url_for(namespace), application_name=app)
    admin_url = spec.url_for(namespace).split("?")[0]
    admin = psycopg.connect(admin_url, autocommit=True, application_name=f"{app}-killer")

    def kill() -> int:
        rows = admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE application_name = %s AND pid <> pg_backend_pid()", (app,)).fetchall()
        return len(rows)

    return url, kill, admin.close


def _redis(namespace: str, app: str) -> tuple[str, Callable[[], int], Callable[[], None]]:
    import redis

    spec = next(s for s in STORES if s.id == "redis")
    _require(spec)
    url = _with_query(spec.url_for(namespace), client_name=app)
    admin = redis.Redis.from_url(spec.url_for(namespace).split("?")[0])

    def kill() -> int:
        ids = [c["id"] for c in admin.client_list() if c.get("name") == app]
        for client in ids:
            admin.client_kill_filter(_id=client)
        return len(ids)

    return url, kill, admin.close


class Churn(threading.Thread):
    """Calls ``kill()`` every ``PAUSE`` seconds until ``stop()``; counts what it killed."""

    def __init__(self, kill: Callable[[], int]) -> None:
        super().__init__(daemon=True)
        self.kill = kill
        self.done = threading.Event()
        self.killed = 0
        self.rounds = 0

    def run(self) -> None:
        while not self.done.wait(random.uniform(*PAUSE)):
            self.killed += self.kill()
            self.rounds += 1

    def stop(self) -> None:
        self.done.set()
        self.join(5)


def figures(records: list[dict[str, Any]], began: float, ended: float) -> dict[str, Any]:
    ticks = begins(records, "tick")
    first_slot, last_slot = int(began) + 1, int(ended) - 1
    expected = list(range(first_slot, last_slot + 1))
    per_slot: dict[int, list[dict[str, Any]]] = {}
    for r in ticks:
        per_slot.setdefault(r["slot"] // 1000, []).append(r)
    started = [s for s in expected if len(per_slot.get(s, [])) == 1]
    lateness = {s: round(min(r["t"] for r in per_slot[s]) - s, 3)
                for s in expected if s in per_slot}
    return dict(expected=len(expected), started_once=len(started),
                never=[s - first_slot for s in expected if s not in per_slot],
                duplicates=duplicates(records, "tick"),
                latest=max(lateness.values(), default=None),
                late=sorted((s - first_slot, t) for s, t in lateness.items()
                            if t > MAX_LATE_S),
                reasons=sorted({r["reason"] for r in ticks}))


@pytest.mark.parametrize("store", ["postgres", "redis"])
def test_connection_churn_loses_no_slot(store: str, clusters: list[Cluster],
                                        tmp_path: Path) -> None:
    namespace = "ch_" + uuid.uuid4().hex[:10]
    app = f"anarchon-churn-{namespace}"
    url, kill, close = (_postgres if store == "postgres" else _redis)(namespace, app)
    churn = Churn(kill)
    try:
        cluster = make_workers(clusters, url, tmp_path, [tick()])
        cluster.start(*INSTANCES)
        time.sleep(2.0)  # settled: every instance holds its connections
        began = time.time()
        churn.start()
        time.sleep(CHURN)
        churn.stop()
        ended = time.time()
        time.sleep(LEASE + 1)  # the last slots' runs start (or not)
        records = cluster.records()
        cluster.stop_all()
    finally:
        churn.stop()
        close()
    found = figures(records, began, ended)
    found.update(kill_rounds=churn.rounds, connections_killed=churn.killed)
    print(f"\nCHURN {store} {found}")
    assert churn.killed >= churn.rounds > CHURN / PAUSE[1] / 2, found  # the fault happened
    assert not found["duplicates"], found
    assert found["started_once"] >= MIN_STARTED * found["expected"], found
    assert not found["late"], found
