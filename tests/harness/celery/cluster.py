"""Real ``celery beat`` and ``celery worker`` processes sharing one JSONL log.

Each process imports ``tests.harness.celery.app`` configured by the JSON in
``ANARCHON_CELERY_TEST``; every publish (``before/after_task_publish``) and every task
run is appended to the log, with wall time and pid.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from tests.harness.cleanup import delete_keys
from tests.harness.procs import ROOT, child_env, terminate
from tests.stores.redis import BASE_URL as REDIS_URL

APP = "tests.harness.celery.app"
BROKER_DB = os.environ.get("ANARCHON_CELERY_BROKER_DB", "13")
# The rig's Redis (``ANARCHON_REDIS_URL``) in its own database; every broker key of this
# test run starts with KEYPREFIX (kombu's ``global_keyprefix``) and is deleted at the end.
BROKER = urlunsplit(urlsplit(REDIS_URL)._replace(path=f"/{BROKER_DB}", query="")
                    ) if REDIS_URL else ""
KEYPREFIX = f"anarchon-test-{uuid.uuid4().hex[:10]}:"
TRANSPORT_OPTIONS = {"global_keyprefix": KEYPREFIX}


class CeleryCluster:
    """Beats and workers of one test: one config, one log, one broker queue."""

    def __init__(self, tmp: Path, config: dict[str, Any]) -> None:
        self.tmp = tmp
        self.log = tmp / "log.jsonl"
        self.config = {"broker": BROKER, "keyprefix": KEYPREFIX, "log": str(self.log),
                       **config}
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    def spawn(self, name: str, args: list[str], config: dict[str, Any] | None = None,
              env_extra: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        """Start ``celery -A <the test app> ARGS`` as process ``name`` (its output in
        ``<tmp>/<name>.out``), with this cluster's config plus ``config``."""
        env = child_env(**(env_extra or {}),
                        ANARCHON_CELERY_TEST=json.dumps({**self.config, **(config or {})}))
        out = (self.tmp / f"{name}.out").open("wb")
        proc = subprocess.Popen([sys.executable, "-m", "celery", "-A", APP, *args], cwd=ROOT,
                                env=env, stdout=out, stderr=subprocess.STDOUT)
        self.procs[name] = proc
        return proc

    def beat(self, name: str, scheduler: str = "anarchon_celery:Scheduler",
             env: dict[str, str] | None = None, **config: Any) -> subprocess.Popen[bytes]:
        """Start ``celery beat`` (``scheduler=""`` for stock beat; ``env``: more
        environment variables, e.g. ``TZ``)."""
        args = ["beat", "-l", "INFO", "-s", str(self.tmp / f"{name}-schedule")]
        if scheduler:
            args += ["-S", scheduler]
        return self.spawn(name, args, config, env)

    def worker(self, name: str, queue: str, pool: str = "solo", concurrency: int = 1,
               extra: list[str] | None = None, **config: Any) -> subprocess.Popen[bytes]:
        """Start ``celery worker`` on ``queue`` (``extra``: more arguments, e.g. ``-B``)."""
        return self.spawn(name, ["worker", "-P", pool, "-c", str(concurrency), "-Q", queue,
                                  "-n", f"{name}-{os.getpid()}@%h", "-l", "INFO",
                                  "--without-gossip", "--without-mingle", *(extra or [])],
                           config)

    def output(self, name: str) -> str:
        return (self.tmp / f"{name}.out").read_text(errors="replace")

    def records(self, kind: str | None = None, **match: Any) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        with self.log.open() as handle:
            # a line still being appended by another process has no newline yet
            lines = [json.loads(line) for line in handle
                     if line.endswith("\n") and line.strip()]
        return [r for r in lines if (kind is None or r["kind"] == kind)
                and all(r.get(k) == v for k, v in match.items())]

    def wait_for(self, check: Callable[[], Any], timeout: float, what: str) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            result = check()
            if result:
                return result
            if time.monotonic() > deadline:
                outputs = {n: self.output(n)[-1500:] for n in self.procs}
                raise AssertionError(f"timed out after {timeout}s waiting for {what}; "
                                     f"log tail: {self.records()[-20:]}; outputs: {outputs}")
            time.sleep(0.05)

    def kill(self, name: str, signum: int = signal.SIGKILL) -> float:
        self.procs[name].send_signal(signum)
        return time.time()

    def name_of(self, pid: int) -> str:
        return next(n for n, p in self.procs.items() if p.pid == pid)

    def stop_all(self, timeout: float = 20) -> None:
        terminate(self.procs.values(), timeout)


def broker_available() -> str | None:
    """None when the Redis broker answers."""
    from tests.stores.redis import redis_unavailable

    if not BROKER:
        return "ANARCHON_REDIS_URL is not set (start servers: python scripts/servers.py start)"
    return redis_unavailable(BROKER, "the Celery test broker (ANARCHON_REDIS_URL)")


def queue_length(queue: str) -> int:
    """Messages waiting in ``queue`` on the test broker."""
    import redis

    client = redis.Redis.from_url(BROKER)
    try:
        return int(client.llen(KEYPREFIX + queue))
    finally:
        client.close()


def delete_broker_keys() -> int:
    """Delete every key this test run put on the broker; returns how many."""
    return delete_keys(BROKER, KEYPREFIX + "*")
