"""``anarchon add`` / ``remove`` / ``add`` of one name while three worker processes run it,
then every process restarted: each command is a real ``anarchon`` process, each worker a
real instance offering the handler (``tests.harness.worker``). The name a ``remove``
freed takes the next ``add`` at once (no "declared in code" because the workers
registered the job), no run of the removed job starts after ``remove`` returned, and the
re-added job runs each slot once, before and after the restart."""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from anarchon import Scheduler, from_url
from tests.harness.cluster import JobCluster
from tests.system.e2e.test_cli import command

OPTIONS = dict(lease=2.0, heartbeat=0.3, jitter=0.1)
TICK = dict(kind="every", name="tick", when="1h", duration=0.0)
Lines = list[dict[str, Any]]


def cli(url: str, *args: str) -> str:
    result = command(*args, "--backend", url)
    assert result.returncode == 0, f"anarchon {' '.join(args)}: {result.stderr}"
    assert "Traceback" not in result.stderr, result.stderr
    return result.stdout


def begun(lines: Lines, version: int, after: float = 0.0) -> list[dict[str, Any]]:
    """Starts of job ``dyn`` with params ``{"v": version}`` logged after ``after``."""
    return [r for r in lines if r["kind"] == "begin" and r["job"] == "dyn"
            and r["params"] == {"v": version} and r["t"] >= after]


def slots_of(version: int, count: int, after: float = 0.0) -> Callable[[Lines], bool]:
    return lambda lines: len({r["slot"] for r in begun(lines, version, after)}) >= count


@pytest.fixture
def cluster(store_url: str, tmp_path: Path) -> Iterator[JobCluster]:
    made = JobCluster(store_url, tmp_path / "log.jsonl", TICK, OPTIONS, handlers=("work",))
    yield made
    made.stop_all()


def test_cli_add_remove_add_then_every_process_restarts(cluster: JobCluster,
                                                        store_url: str) -> None:
    url = store_url
    cluster.start("a", "b", "c")
    cli(url, "add", "dyn", "--handler", "work", "--every", "1s", "--params", '{"v": 1}')
    cluster.wait_for(slots_of(1, 2), 20, "two slots of the first job")

    cli(url, "remove", "dyn")
    removed = time.time()
    out = cli(url, "add", "dyn", "--handler", "work", "--every", "1s", "--params", '{"v": 2}')
    assert out.startswith("added dynamic job 'dyn': handler 'work', every 1s"), out
    readded = time.time()
    cluster.wait_for(slots_of(2, 3, readded), 20, "three slots of the re-added job")
    assert begun(cluster.records(), 1, removed + 0.5) == [], "the removed job ran"
    listed = {job["name"]: job for job in json.loads(cli(url, "jobs", "--json"))["jobs"]}
    assert (listed["dyn"]["source"], listed["dyn"]["params"]) == ("dynamic", {"v": 2})

    cluster.stop_all()  # every process: workers, and each command was one already
    restarted = time.time()
    cluster.start("d", "e", "f")
    cluster.wait_for(slots_of(2, 3, restarted + 1), 30, "three slots after the restart")
    after = begun(cluster.records(), 2, restarted)
    assert {r["instance"] for r in after} <= {"d", "e", "f"}
    controller = Scheduler(from_url(url), instance_id="controller")
    try:
        runs = controller.history("dyn", 1000)
        assert runs and set(Counter(r.slot for r in runs).values()) == {1}, (
            "a slot of the job started twice")
    finally:
        controller.close()
    logged = [r["slot"] for r in cluster.records() if r["kind"] == "begin"
              and r["job"] == "dyn"]
    assert set(Counter(logged).values()) == {1}, "a slot ran twice"

    # the restarted workers registered the job again: the name is still freed by remove
    cli(url, "remove", "dyn")
    removed = time.time()
    cli(url, "add", "dyn", "--handler", "work", "--every", "1s", "--params", '{"v": 3}')
    cluster.wait_for(slots_of(3, 2, removed), 20, "slots of the job re-added after restart")
    assert begun(cluster.records(), 2, removed + 0.5) == []
    changes = json.loads(cli(url, "changes", "dyn", "--json"))
    assert [c["action"] for c in changes] == ["add", "remove", "add", "remove", "add"]
