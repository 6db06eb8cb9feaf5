"""The Celery app the tests run in real beat and worker processes.

Configured by the JSON in ``ANARCHON_CELERY_TEST``: ``broker``, ``keyprefix`` (kombu's
``global_keyprefix`` for every broker key), ``queue``, ``backend``
(anarchon URL), ``scheduler`` (anarchon scheduler options), ``entries`` (name ->
``{"task", "every" | "crontab" | "solar" | "custom", "args", "kwargs", "options"}``;
``solar`` = ``[event, lat, lon]``, ``custom`` = a name in ``schedules.py``), ``timezone``
(JSON null for none) and ``enable_utc``, ``track`` (bool), ``metrics`` (bool:
``anarchon_metrics``),
``store_pool`` (size of a blocking Redis pool: the backend is then built on the app's own
client), ``log`` (JSONL file every publish and task run is appended to), ``publish_delay``,
``many`` (``{"count", "every", "task", "options"}``: that many generated interval entries
``m0000`` …), ``pre_publish_pause`` (seconds: every entry's kwargs get a ``BeatLazyFunc``
that logs ``evaluating`` and sleeps, i.e. a pause after the claim and before the publish),
``report_entries`` (log each entry's ``last_run_at`` / ``total_run_count`` as seen by beat),
``hook_apply_entry`` (wrap beat's ``apply_entry`` as Sentry Crons does; see below),
``sentry_crons`` (Sentry's own Celery integration with ``monitor_beat_tasks=True``; each
publish logs its ``sentry-monitor-*`` headers),
``pool_limit`` (``broker_pool_limit``; kombu's default, 10, when absent).
"""

from __future__ import annotations

import json
import os
import threading
import time
from datetime import timedelta
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from celery import Celery, signals
from celery.beat import BeatLazyFunc
from celery.schedules import crontab, solar

from anarchon_celery import token_from_request, track_outcomes

CONFIG: dict[str, Any] = json.loads(os.environ.get("ANARCHON_CELERY_TEST") or "{}")
_lock = threading.Lock()

app = Celery("anarchon_test", broker=CONFIG.get("broker"), set_as_current=True)
app.conf.update(
    broker_transport_options={"global_keyprefix": CONFIG.get("keyprefix", "")},
    task_default_queue=CONFIG.get("queue", "celery"),
    timezone=CONFIG.get("timezone", "UTC"),  # JSON null: no timezone (enable_utc decides)
    enable_utc=CONFIG.get("enable_utc", True),
    broker_connection_retry_on_startup=True,
    worker_hijack_root_logger=False,
    worker_prefetch_multiplier=1,
    beat_max_loop_interval=5,
)
if "pool_limit" in CONFIG:
    app.conf.broker_pool_limit = int(CONFIG["pool_limit"])
def _store_client_backend(url: str, size: int) -> Any:
    """A Redis backend on the application's own client with a blocking pool of ``size``
    connections (bursts of claims wait for a connection instead of failing)."""
    import redis.asyncio

    from anarchon.backends.redis import RedisBackend

    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query))
    prefix = query.pop("prefix", "cron:")
    base = urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode(query), ""))
    pool = redis.asyncio.BlockingConnectionPool.from_url(base, max_connections=size,
                                                         timeout=None)
    return RedisBackend(redis=redis.asyncio.Redis(connection_pool=pool), prefix=prefix)


if CONFIG.get("backend"):
    app.conf.anarchon_backend = (
        _store_client_backend(CONFIG["backend"], int(CONFIG["store_pool"]))
        if CONFIG.get("store_pool") else CONFIG["backend"])
app.conf.anarchon_scheduler = CONFIG.get("scheduler", {})
if CONFIG.get("metrics"):  # served on ANARCHON_METRICS_PORT
    app.conf.anarchon_metrics = True
if CONFIG.get("queue_lease"):
    app.conf.anarchon_queue_lease = CONFIG["queue_lease"]


def _schedule(spec: dict[str, Any]) -> Any:
    if "crontab" in spec:
        return crontab(**spec["crontab"])
    if "solar" in spec:
        return solar(*spec["solar"])
    if "custom" in spec:
        from tests.harness.celery.schedules import custom_schedule

        return custom_schedule(spec["custom"], spec.get("every", 1))
    return timedelta(seconds=spec["every"])


def _pause(seconds: float) -> float:
    """Runs in the beat between winning a slot and publishing it (a ``BeatLazyFunc``)."""
    log(kind="evaluating")
    time.sleep(seconds)
    return 0.0


def _entries() -> dict[str, dict[str, Any]]:
    specs = dict(CONFIG.get("entries", {}))
    many = CONFIG.get("many")
    if many:
        for i in range(int(many["count"])):
            specs[f"m{i:04d}"] = {"task": many.get("task", "t.noop"), "every": many["every"],
                                  "options": many.get("options", {})}
    pause = CONFIG.get("pre_publish_pause")
    entries = {}
    for name, spec in specs.items():
        kwargs = dict(spec.get("kwargs", {}))
        if pause:
            kwargs["seconds"] = BeatLazyFunc(_pause, float(pause))
        entries[name] = {"task": spec["task"], "schedule": _schedule(spec),
                         "args": spec.get("args", []), "kwargs": kwargs,
                         "options": spec.get("options", {})}
    return entries


app.conf.beat_schedule = _entries()
if CONFIG.get("track"):
    track_outcomes(app)


def log(**fields: Any) -> None:
    """Append one JSON line to the shared log (all processes)."""
    path = CONFIG.get("log")
    if not path:
        return
    fields.update(t=time.time(), pid=os.getpid())
    with _lock, open(path, "a") as handle:
        handle.write(json.dumps(fields) + "\n")


def _hook_apply_entry() -> None:
    """What Sentry Crons' Celery beat integration does (sentry_sdk/integrations/celery/
    beat.py): wrap ``celery.beat.Scheduler.apply_entry``, add headers to the entry's
    options, call the original. Each call is logged (``apply_entry``)."""
    from celery import beat

    original = beat.Scheduler.apply_entry

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        entry = args[1]
        log(kind="apply_entry", job=entry.name)
        headers = entry.options.pop("headers", {})
        headers.update({"x-hook": entry.name})
        entry.options["headers"] = headers
        return original(*args, **kwargs)

    beat.Scheduler.apply_entry = wrapped  # type: ignore[method-assign]


if CONFIG.get("hook_apply_entry"):
    _hook_apply_entry()
if CONFIG.get("sentry_crons"):
    # Sentry Crons' own Celery beat integration (it wraps apply_entry and adds the
    # sentry-monitor-* headers); its events go to a port nothing listens on
    import sentry_sdk
    from sentry_sdk.integrations.celery import CeleryIntegration

    sentry_sdk.init(dsn="http://public@127.0.0.1:9/1", default_integrations=False,
                    auto_enabling_integrations=False,
                    integrations=[CeleryIntegration(monitor_beat_tasks=True)])


@signals.before_task_publish.connect
def _publishing(sender: Any = None, headers: Any = None, **_: Any) -> None:
    headers = headers or {}
    log(kind="publishing", task=sender, job=headers.get("anarchon_job"),
        slot=headers.get("anarchon_slot"), attempt=headers.get("anarchon_attempt"),
        hook=headers.get("x-hook"), manual=headers.get("anarchon_manual") is not None,
        monitor=headers.get("sentry-monitor-slug"),
        monitor_config=headers.get("sentry-monitor-config"))
    delay = CONFIG.get("publish_delay")
    if delay and headers.get("anarchon_attempt") == 1:
        time.sleep(delay)


@signals.after_task_publish.connect
def _published(sender: Any = None, headers: Any = None, **_: Any) -> None:
    headers = headers or {}
    log(kind="publish", task=sender, id=headers.get("id"), job=headers.get("anarchon_job"),
        slot=headers.get("anarchon_slot"), attempt=headers.get("anarchon_attempt"),
        entry=headers.get("entry"), manual=headers.get("anarchon_manual") is not None)


def _run_log(task: Any, kind: str, **fields: Any) -> None:
    token = token_from_request(task.request)
    log(kind=kind, task=task.name, id=task.request.id,
        job=token.name if token else None, slot=token.slot if token else None,
        attempt=token.attempt if token else None, retries=task.request.retries, **fields)


def _report_entries(service: Any) -> None:
    """Log the beat's view of each configured entry (``last_run_at``, ``total_run_count``)
    every 0.3 s, as a health check would read it."""
    names = list(CONFIG.get("entries", {}))
    seen: dict[str, Any] = {}
    while True:
        scheduler = service.__dict__.get("scheduler")  # never build it here
        if scheduler is not None:
            for name in names:
                entry = scheduler.schedule.get(name)
                if entry is None:
                    continue
                state = (entry.last_run_at.isoformat() if entry.last_run_at else None,
                         entry.total_run_count)
                if seen.get(name) != state:
                    seen[name] = state
                    log(kind="entry", job=name, last_run_at=state[0], count=state[1])
        time.sleep(0.3)


@signals.beat_init.connect
def _beat_started(sender: Any = None, **_: Any) -> None:
    if CONFIG.get("report_entries"):
        threading.Thread(target=_report_entries, args=(sender,), daemon=True).start()


@app.task(bind=True, name="t.ok")
def ok(self: Any, seconds: float = 0.0) -> str:
    _run_log(self, "run")
    time.sleep(seconds)
    _run_log(self, "done")
    return "ok"


@app.task(bind=True, name="t.noop")
def noop(self: Any) -> None:
    _run_log(self, "run")


@app.task(bind=True, name="t.boom")
def boom(self: Any) -> None:
    _run_log(self, "run")
    raise RuntimeError("boom")


@app.task(bind=True, name="t.retry_once", max_retries=3)
def retry_once(self: Any, countdown: float = 0.5) -> str:
    """Retries once after ``countdown`` seconds (retrying ``ConnectionError: flaky``)."""
    _run_log(self, "run")
    if self.request.retries == 0:
        raise self.retry(exc=ConnectionError("flaky"), countdown=countdown)
    return "retried"


@app.task(bind=True, name="t.hang")
def hang(self: Any) -> str:
    """Hangs on attempt 1 (to be killed), returns at once on later attempts."""
    _run_log(self, "run")
    token = token_from_request(self.request)
    if token is not None and token.attempt == 1:
        time.sleep(120)
    return "done"
