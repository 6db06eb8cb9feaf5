"""Issue 15, finding 7: values the engine accepted but the store (or Python) cannot take,
silent or colliding configuration, and logging that a listener switches off.

Unit level: SQLite files, and the shared Redis/Valkey (``ANARCHON_*_URL``) for the key
collision. Each test is strict-xfail where today's code fails it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import pytest

from anarchon import Event, RunContext, Scheduler, from_url
from tests.conftest import only_lease_stores
from tests.harness.servers import SqliteLock

JOB = "nightly-report"  # distinctive: a message naming it cannot match by accident


def _handler(ctx: RunContext) -> None:
    return None


def _sqlite(tmp_path: Path, **query: str) -> str:
    extra = "".join(f"&{k}={v}" for k, v in query.items())
    return f"sqlite:///{tmp_path / 'jobs.db'}?table=runs{extra}"


def gap(reason: str) -> pytest.MarkDecorator:
    return pytest.mark.xfail(reason=f"issue 15: {reason}", strict=True)



@pytest.mark.parametrize(("register", "words"), [
    pytest.param(lambda s: s.at(JOB, 1e20, _handler), (JOB, "1e+20"), id="at-1e20"),
    pytest.param(lambda s: s.at(JOB, float("inf"), _handler), (JOB, "inf"), id="at-inf"),
    pytest.param(lambda s: s.every(JOB, "1s", _handler, history_size=2**70),
                 (JOB, "history_size"), id="history_size-2**70"),
    pytest.param(lambda s: s.every(JOB, "1s", _handler, max_attempts=2**70),
                 (JOB, "max_attempts"), id="max_attempts-2**70"),
    pytest.param(lambda s: s.every(JOB, "1s", _handler, max_late=1e15),
                 (JOB, "max_late"), id="max_late-1e15s"),
])
def test_out_of_range_values_are_refused_at_registration(
        tmp_path: Path, register: Callable[[Scheduler], object],
        words: tuple[str, ...]) -> None:
    scheduler = Scheduler(from_url(_sqlite(tmp_path)))
    with pytest.raises(ValueError, match=JOB) as caught:
        register(scheduler)
    missing = [word for word in words if word not in str(caught.value)]
    assert not missing, f"{caught.value!r} does not name {missing}"


def test_past_at_logs_one_warning_naming_job_and_time(tmp_path: Path,
                                                      caplog: pytest.LogCaptureFixture
                                                      ) -> None:
    when = datetime(2020, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
    scheduler = Scheduler(from_url(_sqlite(tmp_path)))
    scheduler.at(JOB, when, _handler)
    with caplog.at_level(logging.WARNING, logger="anarchon"):
        scheduler.start()
        try:
            [info] = [job for job in scheduler.jobs() if job.name == JOB]
        finally:
            scheduler.stop(1)
    assert info.next_run is None, info  # done: nothing left to run
    said = [r.getMessage() for r in caplog.records if r.name.startswith("anarchon")
            and r.levelno >= logging.WARNING and JOB in r.getMessage()]
    assert len(said) == 1 and "2020-01-02" in said[0], said


def test_an_error_listener_does_not_silence_the_log(tmp_path: Path,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    url = _sqlite(tmp_path, busy_timeout="0.2s")
    scheduler = Scheduler(from_url(url), lease=2, heartbeat=0.3)
    scheduler.every(JOB, "1s", _handler, jitter=0)
    heard = threading.Event()

    def listener(event: Event) -> None:
        heard.set()

    scheduler.on("error", listener)
    lock = SqliteLock(url)
    with caplog.at_level(logging.WARNING, logger="anarchon"):
        scheduler.start()
        try:
            locked = time.time()
            lock.down()  # a writer holds the lock past busy_timeout: claims fail
            assert heard.wait(5), "no error event while the store was locked"
        finally:
            lock.close()
            scheduler.stop(1)
    logged = [r for r in caplog.records if r.name.startswith("anarchon")
              and r.levelno >= logging.WARNING and r.created >= locked]
    assert logged, "the listener heard a store error but nothing was logged"


def _with_prefix(url: str, prefix: str) -> str:
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query) if k != "prefix"]
    return urlunsplit((*parts[:3], urlencode([*query, ("prefix", prefix)]), ""))


@only_lease_stores("redis", "valkey")
def test_prefix_and_job_pairs_do_not_share_keys(store_url: str, namespace: str) -> None:
    first = Scheduler(from_url(_with_prefix(store_url, f"{namespace}svc")))
    second = Scheduler(from_url(_with_prefix(store_url, f"{namespace}svc1")))
    first.every("1tick", "1h", _handler)
    second.every("tick", "1h", _handler)
    try:
        first.run_now("1tick")
        seen = second.history("tick")
    finally:
        first.close()
        second.close()
    assert seen == [], f"job 'tick' under prefix svc1 sees runs of '1tick' under svc: {seen}"


@pytest.mark.parametrize("make", [
    pytest.param(lambda: _redis_backend(""), id="RedisBackend-prefix-empty"),
    pytest.param(lambda: from_url("redis://127.0.0.1?prefix="), id="url-prefix-empty"),
])
def test_an_empty_prefix_is_refused(make: Callable[[], Any]) -> None:
    with pytest.raises(ValueError, match="prefix"):
        make()


def _redis_backend(prefix: str) -> Any:
    from anarchon.backends.redis import RedisBackend

    return RedisBackend(redis="redis://127.0.0.1", prefix=prefix)
