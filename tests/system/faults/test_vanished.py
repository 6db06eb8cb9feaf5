"""A run whose record the store forgot while it executes (a restore from an older backup,
a flush) is decided again, not given up.

Three instances (lease 2 s, heartbeat 0.3 s), one 6 s run; 1 s into it the store loses
the run's record: our own Redis is ``FLUSHALL``-ed (the job registrations go too), or
the job's rows are deleted from PostgreSQL's or SQLite's runs and attempts tables in one
transaction (as a restore from before the claim would leave them). Expected (docs/guarantees.md,
"Replication"): the runner's renewal finds no record — not another owner — so it aborts
the handler (``lost``) and, once it stopped, claims the slot again (``scheduled``, within
``max_late``): the slot starts again exactly once and succeeds once.
"""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest

from tests.conftest import STORES, _require
from tests.harness.checks import begins, decided_again, events, history, told_gone
from tests.harness.cluster import Cluster, first
from tests.harness.faults import make_workers
from tests.harness.servers import RedisLike
from tests.system.faults.conftest import missing


def _store(kind: str, namespace: str, tmp_path: Path) -> tuple[str, Callable[[], None],
                                                                 Callable[[], None]]:
    """The URL, a way to forget the run, and a cleanup."""
    if kind == "redis":
        binary = shutil.which("redis-server")
        if binary is None or shutil.which("redis-cli") is None:
            missing("redis-server and redis-cli")
        assert binary is not None
        own = RedisLike(binary, tmp_path, aof=False)

        def flush() -> None:
            subprocess.run(["redis-cli", "-h", "127.0.0.1", "-p", str(own.port),
                            "FLUSHALL"], check=True, capture_output=True)

        return f"{own.url}?prefix={namespace}:", flush, own.close
    spec = next(s for s in STORES if s.id == kind)
    _require(spec)
    url = spec.url_for(namespace)
    table = f"t_{namespace}"
    if kind == "postgres":
        dsn = url.split("?", 1)[0]

        def delete() -> None:
            with psycopg.connect(dsn) as conn:  # one transaction: a consistent restore
                for name in (table, f"{table}_attempts"):
                    conn.execute(f'DELETE FROM "{name}" WHERE job = %s', ("once",))

        return url, delete, lambda: None
    path = url.split("sqlite:///", 1)[1].split("?", 1)[0]

    def delete_row() -> None:
        with sqlite3.connect(path, timeout=10) as conn:  # one transaction
            for name in (table, f"{table}_attempts"):
                conn.execute(f'DELETE FROM "{name}" WHERE job = ?', ("once",))

    return url, delete_row, lambda: None


@pytest.mark.parametrize("kind", ["redis", "postgres", "sqlite"])
def test_a_forgotten_run_is_decided_again(kind: str, namespace: str, tmp_path: Path,
                                          clusters: list[Cluster]) -> None:
    url, forget, cleanup = _store(kind, namespace, tmp_path)
    try:
        cluster = make_workers(clusters, url, tmp_path, [
            dict(kind="at", name="once", when="@go", duration=6.0,
                 options=dict(max_late=60))])
        cluster.start_deferred("a", "b", "c")
        run1 = cluster.wait_for(first("begin", job="once", attempt=1), 15, "the run")
        time.sleep(1.0)
        forget()
        forgotten = cluster.note("fault", "store", fault="run record removed")
        decided_again(cluster, run1, forgotten)
        time.sleep(2.6)  # a lease and two heartbeats: nothing else may start the slot
        records = cluster.records()
        assert len(begins(records, "once")) == 2, begins(records, "once")
        assert len(events(records, "success", "once")) == 1
        assert told_gone(records) == [run1["instance"]]
        assert [r.status for r in history(url, "once") if not r.manual] == ["success"]
    finally:
        cleanup()
