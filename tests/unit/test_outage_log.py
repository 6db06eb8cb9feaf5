"""Store errors in the log: one WARNING when an outage starts, one INFO when it ends,
however many calls fail, and the same whether or not an ``error`` listener is registered.

Unit level on :class:`anarchon.engine.outages.OutageLog`, then a real scheduler on a real SQLite
file whose write lock another connection holds past ``busy_timeout``.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

import pytest

from anarchon import Event, RunContext, Scheduler, from_url
from anarchon.engine.outages import OutageLog
from anarchon.errors import StoreDataError
from tests.harness.servers import SqliteLock


def _ours(caplog: pytest.LogCaptureFixture, level: int) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == "anarchon" and r.levelno == level]


def test_one_warning_at_the_start_and_one_info_at_the_end(
        caplog: pytest.LogCaptureFixture) -> None:
    log = OutageLog(store="<RedisBackend redis 127.0.0.1:6379 prefix='p:'>")
    with caplog.at_level(logging.INFO, logger="anarchon"):
        log.answered()  # no outage: nothing to say
        for n in range(50):
            log.failed("job", ConnectionError(f"refused {n}"))
        log.answered()
        log.answered()
    assert _ours(caplog, logging.WARNING) == [
        "store <RedisBackend redis 127.0.0.1:6379 prefix='p:'> not answering (job job): "
        "ConnectionError: refused 0; retrying, and saying so once it answers"]
    [info] = _ours(caplog, logging.INFO)
    assert "answering again" in info and "50 failed call(s)" in info
    assert _ours(caplog, logging.ERROR) == []


def test_a_failure_just_after_the_end_is_the_outage_s_tail(
        caplog: pytest.LogCaptureFixture) -> None:
    """A call sent during the outage may fail after another call ended it (a claim that
    waited for SQLite's write lock): within ``grace`` it is the tail, not a new outage;
    a failure after ``grace`` starts a new one, with its own WARNING."""
    now = [100.0]
    log = OutageLog(monotonic=lambda: now[0], store="<SqliteBackend jobs.db>", grace=0.5)
    with caplog.at_level(logging.INFO, logger="anarchon"):
        log.failed("a", ConnectionError("locked"))
        now[0] += 2.0
        log.answered()
        now[0] += 0.4
        log.failed("b", ConnectionError("lock came late"))  # the tail
        assert log.since is None and log.failures == 0
        assert len(_ours(caplog, logging.WARNING)) == 1
        now[0] += 0.2
        log.failed("c", ConnectionError("down again"))  # past grace: a new outage
        log.answered()
    warnings = _ours(caplog, logging.WARNING)
    assert len(warnings) == 2 and "down again" in warnings[1], warnings
    assert len(_ours(caplog, logging.INFO)) == 2


def test_a_call_timeout_names_the_store_and_the_cause(
        caplog: pytest.LogCaptureFixture) -> None:
    """anarchon's own call timeout raises a TimeoutError without text (issue 34, 7a)."""
    log = OutageLog(store="<PostgresBackend 127.0.0.1:5432>")
    with caplog.at_level(logging.INFO, logger="anarchon"):
        log.failed(None, TimeoutError())
    [warning] = _ours(caplog, logging.WARNING)
    assert warning == ("store <PostgresBackend 127.0.0.1:5432> not answering: TimeoutError: "
                       "no answer within anarchon's call timeout; retrying, and saying so "
                       "once it answers")


def test_a_data_error_is_no_outage(caplog: pytest.LogCaptureFixture) -> None:
    """WRONGTYPE and records that do not decode are data, not an outage: one WARNING per
    distinct message, no outage state, no "answering again" afterwards."""
    log = OutageLog(store="<RedisBackend redis 127.0.0.1:6379 prefix='p:'>")
    with caplog.at_level(logging.INFO, logger="anarchon"):
        for _ in range(5):
            log.failed("job", StoreDataError("redis at 127.0.0.1:6379: WRONGTYPE Operation"))
        log.answered()
    [warning] = _ours(caplog, logging.WARNING)
    assert "holds data anarchon cannot read (job job)" in warning
    assert "WRONGTYPE" in warning and "not answering" not in warning
    assert log.since is None and log.failures == 0
    assert _ours(caplog, logging.INFO) == []


@pytest.mark.parametrize("listening", [False, True], ids=["no-listener", "listener"])
def test_a_locked_store_logs_once_either_way(tmp_path: Path, listening: bool,
                                             caplog: pytest.LogCaptureFixture) -> None:
    url = f"sqlite:///{tmp_path / 'jobs.db'}?table=runs&busy_timeout=0.2s"
    scheduler = Scheduler(from_url(url), lease=2, heartbeat=0.3)
    ran = threading.Event()
    after: list[float] = []

    def handler(ctx: RunContext) -> None:
        after.append(time.time())
        ran.set()

    for name in ("a", "b", "c"):
        scheduler.every(name, "0.5s", handler, jitter=0)
    errors: list[Event] = []
    if listening:
        scheduler.on("error", errors.append)
    lock = SqliteLock(url)
    with caplog.at_level(logging.INFO, logger="anarchon"):
        scheduler.start()
        try:
            assert ran.wait(5), "no run before the lock"
            lock.down()
            time.sleep(2.0)  # the fault: claims of three jobs fail for 2 s
            lock.up()
            back = time.time()
            deadline = time.monotonic() + 10
            while not [t for t in after if t > back + 0.2]:
                assert time.monotonic() < deadline, "no run after the lock was released"
                time.sleep(0.05)
        finally:
            lock.close()
            scheduler.stop(1)
    warnings = [m for m in _ours(caplog, logging.WARNING) if "not answering" in m]
    infos = [m for m in _ours(caplog, logging.INFO) if "answering again" in m]
    assert len(warnings) == 1 and "locked" in warnings[0], warnings
    assert len(infos) == 1, infos
    assert not [m for m in _ours(caplog, logging.ERROR) if "store" in m]
    if listening:
        assert len(errors) > 1  # the listener heard every failed call
