"""Three Celery beats, one publish per slot: ``python examples/celery_app.py``.

Starts three ``celery beat -S anarchon_celery:Scheduler`` processes on this app (Redis
broker at ``REDIS_URL``, default ``redis://127.0.0.1:6379/0``; the store is the broker's
Redis unless ``--backend URL``), lets them run about 20 seconds (``--seconds N``) with a
2-second entry and a per-minute crontab, then prints how often each slot was published:
once, by whichever beat won it. Every beat runs; none is a leader. Use the app module
itself with::

    celery -A examples.celery_app beat -S anarchon_celery:Scheduler   # on every node
    celery -A examples.celery_app worker
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from celery import Celery, signals
from celery.schedules import crontab

REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
# the demo's beats log each publish here (main() gives them a temporary file)
LOG = Path(os.environ.get("CELERY_EXAMPLE_LOG") or os.devnull)

app = Celery("example", broker=REDIS_URL)
app.conf.update(
    timezone="Europe/Berlin",
    task_default_queue="anarchon-example",
    # anarchon_backend defaults to the broker's Redis (prefix "anarchon:"); set it to use
    # PostgreSQL or SQLite instead, e.g. "postgresql://…" or "sqlite:///beat.db".
    anarchon_backend=os.environ.get("ANARCHON_BACKEND") or None,
    anarchon_scheduler={"lease": "10s", "heartbeat": "2s", "jitter": "300ms"},
    beat_schedule={
        "heartbeat": {"task": "example.ping", "schedule": 2.0},  # every 2 s on the UTC grid
        "report": {"task": "example.ping", "schedule": crontab(minute="*"),
                   "options": {"anarchon": {"max_attempts": 2}}},
    },
)


@app.task(name="example.ping")
def ping() -> str:
    return "pong"


@signals.after_task_publish.connect
def _published(headers: Any = None, **_: Any) -> None:
    headers = headers or {}
    with LOG.open("a") as handle:
        handle.write(f"{os.getpid()} {headers.get('anarchon_job')} "
                     f"{headers.get('anarchon_slot')}\n")


def main() -> None:
    parser = argparse.ArgumentParser(description="three beats, one publish per slot")
    parser.add_argument("--seconds", type=float, default=20.0, help="how long to run")
    parser.add_argument("--backend", default=os.environ.get("ANARCHON_BACKEND"),
                        help="anarchon store URL (default: the broker's Redis)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="anarchon-celery-example-") as folder:
        log = Path(folder) / "publishes.log"
        lines = run_beats(args.seconds, args.backend, folder, log)
    per_slot = Counter((job, slot) for _, job, slot in lines)
    for (job, slot), count in sorted(per_slot.items(), key=lambda kv: kv[0][1]):
        winners = sorted({pid for pid, j, s in lines if (j, s) == (job, slot)})
        print(f"{job:10} slot {slot}: published {count}x by beat {', '.join(winners)}")
    print(f"{len(lines)} publishes for {len(per_slot)} slots across 3 beats")


def run_beats(seconds: float, backend: str | None, folder: str,
              log: Path) -> list[list[str]]:
    """Three beats for ``seconds`` (state files in ``folder``); each publish logged."""
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": str(root), "CELERY_EXAMPLE_LOG": str(log)}
    if backend:
        env["ANARCHON_BACKEND"] = backend
    beats = [subprocess.Popen([sys.executable, "-m", "celery", "-A", "examples.celery_app",
                               "beat", "-S", "anarchon_celery:Scheduler", "-l", "WARNING",
                               "-s", os.path.join(folder, f"beat-{n}")], cwd=root, env=env)
             for n in range(3)]
    print(f"started 3 beats: {[b.pid for b in beats]}; running {seconds:g} s …")
    try:
        time.sleep(seconds)
    except KeyboardInterrupt:
        print("interrupted: stopping the beats")
    for beat in beats:
        beat.send_signal(signal.SIGTERM)
    for beat in beats:
        beat.wait(30)
    return [line.split() for line in log.read_text().splitlines()] if log.exists() else []


if __name__ == "__main__":
    main()
