"""The Celery app of the ``peers`` benchmark's ``celery beat`` processes.

No worker ever runs: the beats only publish. Configured by the JSON in
``ANARCHON_BENCH_PEER``: ``broker`` (Redis URL), ``queue`` (the run's own queue),
``entries`` (how many interval entries ``e000`` … sending tasks ``peer.e000`` …),
``every`` (seconds), ``max_loop_interval`` (``beat_max_loop_interval``), ``conf`` (more
Celery settings: ``anarchon_*``, ``redbeat_*``) and ``log``: a file this process appends
one line to per publish (``after_task_publish``): ``wall-time task slot attempt``
(slot and attempt are anarchon's headers, ``-`` for other schedulers).
"""

from __future__ import annotations

import json
import os
import threading
import time
from datetime import timedelta
from typing import Any, TextIO

from celery import Celery, signals

CONFIG: dict[str, Any] = json.loads(os.environ.get("ANARCHON_BENCH_PEER") or "{}")
TASK_PREFIX = "peer."

app = Celery("anarchon_bench_peers", broker=CONFIG.get("broker", "redis://127.0.0.1:6379/0"),
             set_as_current=True)
app.conf.update(
    task_default_queue=CONFIG.get("queue", "celery"),
    timezone="UTC",
    broker_connection_retry_on_startup=True,
    beat_max_loop_interval=float(CONFIG.get("max_loop_interval", 5)),
    **CONFIG.get("conf", {}),
)
_every = timedelta(seconds=float(CONFIG.get("every", 1)))
app.conf.beat_schedule = {f"e{i:03d}": {"task": f"{TASK_PREFIX}e{i:03d}", "schedule": _every}
                          for i in range(int(CONFIG.get("entries", 0)))}

_lock = threading.Lock()
_log: TextIO | None = open(CONFIG["log"], "a", buffering=1) if CONFIG.get("log") else None  # noqa: SIM115


@signals.after_task_publish.connect
def _published(sender: Any = None, headers: Any = None, **_: Any) -> None:
    if _log is None or not str(sender).startswith(TASK_PREFIX):
        return
    headers = headers or {}
    line = (f"{time.time():.6f} {sender} {headers.get('anarchon_slot') or '-'} "
            f"{headers.get('anarchon_attempt') or '-'}\n")
    with _lock:
        _log.write(line)
