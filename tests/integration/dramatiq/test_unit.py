"""anarchon_dramatiq on Dramatiq's StubBroker: marks, registration, and the middleware's
outcome tracking against a real (SQLite) store. Real brokers: ``test_brokers.py``."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import dramatiq
import pytest
from dramatiq import Worker
from dramatiq.brokers.stub import StubBroker
from dramatiq.middleware import CurrentMessage, Retries

import anarchon
import anarchon_dramatiq as ad
from anarchon import SqliteBackend
from tests.harness.dramatiq.fixtures import history_of, run_scheduler


def wait_for(check: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while not (result := check()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.02)
    return result


# -- marks ----------------------------------------------------------------------------------

def test_marks_stack_above_and_below_the_actor(broker: StubBroker) -> None:
    @ad.every("5m", max_attempts=1, max_retries=0)
    @dramatiq.actor(broker=broker)
    def above() -> None: ...

    @dramatiq.actor(broker=broker, actor_name="renamed")
    @ad.cron("0 2 * * *", timezone="Europe/Berlin", name="nightly")
    def below() -> None: ...

    found = {(actor.actor_name, mark.kind) for actor, mark in ad.marked_actors(broker)}
    assert found == {("above", "every"), ("renamed", "cron")}
    (mark,) = ad.marks_of(above)
    assert mark.job_options == {"max_attempts": 1}
    assert mark.message_options == {"max_retries": 0}
    assert ad.marks_of(below)[0].name == "nightly"


def test_options_split_between_job_and_message() -> None:
    mark = ad.every("10s", jitter="1s", catch_up=0, queue_name="q", delay=500,
                    args=(1,), kwargs={"a": 2}, time_limit=1000, track=True,
                    queue_lease="1m")
    fn: Any = lambda: None  # noqa: E731
    (made,) = ad.marks_of(mark(fn))
    assert made.job_options == {"jitter": "1s", "catch_up": 0}
    assert made.message_options == {"time_limit": 1000}
    assert (made.queue_name, made.delay, made.args, made.kwargs) == ("q", 500, (1,), {"a": 2})
    assert (made.track, made.queue_lease) == (True, 60.0)


@pytest.mark.parametrize(("call", "error"), [
    (lambda: ad.every("-5s"), ValueError),
    (lambda: ad.every("5s", overlap="sometimes"), ValueError),
    (lambda: ad.cron("61 * * * *"), ValueError),
    (lambda: ad.cron("0 * * * *", timezone="Mars/Base"), ValueError),
    (lambda: ad.at("2030-01-01T00:00:00"), ValueError),  # naive
    (lambda: ad.at("2030-01-01T00:00:00Z", overlap="skip"), TypeError),
    (lambda: ad.every("5s", timezone="UTC"), TypeError),
    (lambda: ad.every("5s", anarchon_slot=1), TypeError),
    (lambda: ad.every("5s", track="yes"), TypeError),
    (lambda: ad.every("5s", delay="soon"), TypeError),
    (lambda: ad.every("5s", name=""), ValueError),
])
def test_bad_marks_fail_when_declared(call: Callable[[], object], error: type) -> None:
    with pytest.raises(error):
        call()


def test_registration_names_jobs_after_actors(broker: StubBroker, db: str) -> None:
    @ad.every("10s")
    @dramatiq.actor(broker=broker)
    def refresh() -> None: ...

    @ad.at("2030-01-01T00:00:00Z", name="launch")
    @dramatiq.actor(broker=broker)
    def go() -> None: ...

    scheduler = anarchon.Scheduler(SqliteBackend(database=db))
    assert sorted(ad.register_actors(scheduler, broker)) == ["launch", "refresh"]
    assert sorted(scheduler.job_names) == ["launch", "refresh"]
    assert {info.name: info.framework for info in scheduler.jobs()} == {
        "launch": "dramatiq", "refresh": "dramatiq"}  # marked by kind (anarchon list)
    with pytest.raises(ValueError, match="refresh"):
        ad.register_actors(scheduler, broker, actors=[refresh])  # already registered
    scheduler.close()


def test_middleware_rejects_bad_options() -> None:
    with pytest.raises(ValueError, match="heartbeat"):
        ad.AnarchonMiddleware("sqlite:///x.db", lease=1, heartbeat=2)
    with pytest.raises(TypeError):
        ad.AnarchonMiddleware(42)  # type: ignore[arg-type]


def test_install_puts_the_middleware_before_retries(broker: StubBroker) -> None:
    middleware = ad.install_middleware(broker, "sqlite:///unused.db")
    order = [type(m) for m in broker.middleware]
    assert order.index(ad.AnarchonMiddleware) == order.index(Retries) - 1
    assert broker.middleware[order.index(ad.AnarchonMiddleware)] is middleware


# -- sending and tracking on the stub broker with a real store --------------------------------

class Seen:
    def __init__(self) -> None:
        self.options: list[dict[str, Any]] = []


def test_untracked_message_carries_the_slot(broker: StubBroker, db: str) -> None:
    seen = Seen()

    @ad.every("1s", args=(7,), kwargs={"k": "v"}, max_retries=3)
    @dramatiq.actor(broker=broker)
    def tick(n: int, k: str) -> None:
        message = CurrentMessage.get_current_message()
        assert message is not None and (n, k) == (7, "v")
        seen.options.append(dict(message.options))

    worker = Worker(broker, worker_timeout=50)
    worker.start()
    try:
        run_scheduler(db, broker, lambda: len(seen.options) >= 2, 10)
    finally:
        worker.stop()
    first = seen.options[0]
    assert first["anarchon_job"] == "tick" and first["anarchon_attempt"] == 1
    assert first["anarchon_slot"] % 1000 == 0 and first["max_retries"] == 3
    assert "anarchon_owner" not in first  # untracked: finished when sent
    history = history_of(db, "tick")
    assert history and {r.status for r in history} == {"success"}



def test_tracked_outcomes_success_and_final_failure(broker: StubBroker, db: str) -> None:
    middleware = ad.install_middleware(broker, f"sqlite:///{db}", lease=2, heartbeat=0.3)
    calls: list[tuple[str, int]] = []

    @ad.every("1s", track=True)
    @dramatiq.actor(broker=broker)
    def good() -> None:
        calls.append(("good", 0))

    @ad.every("1s", track=True, max_retries=1, min_backoff=10, max_backoff=20)
    @dramatiq.actor(broker=broker)
    def bad() -> None:
        calls.append(("bad", 0))
        raise RuntimeError("boom")

    worker = Worker(broker, worker_timeout=50)
    worker.start()
    try:
        def settled() -> bool:
            return (sum(1 for c in calls if c[0] == "good") >= 2
                    and sum(1 for c in calls if c[0] == "bad") >= 4)
        run_scheduler(db, broker, settled, 15)
        broker.join(good.queue_name, fail_fast=False)
        worker.join()
    finally:
        worker.stop()
        middleware.close()
    good_runs = history_of(db, "good")
    assert good_runs and {r.status for r in good_runs} == {"success"}
    finished = [r for r in history_of(db, "bad") if r.status != "running"]
    assert finished and {r.status for r in finished} == {"failure"}
    assert {r.error for r in finished} == {"RuntimeError: boom"}  # the note was replaced
    assert {r.error for r in history_of(db, "bad") if r.status == "running"} <= {
        None, "retrying: RuntimeError: boom"}
    # one record per slot: the retry stayed inside the same attempt
    assert len({r.slot for r in finished}) == len(finished)


def test_message_of_a_replaced_attempt_is_skipped(broker: StubBroker, db: str) -> None:
    """A token whose attempt is not the store's current one never runs."""
    middleware = ad.install_middleware(broker, f"sqlite:///{db}", lease=2, heartbeat=0.3)
    ran: list[int] = []

    @dramatiq.actor(broker=broker)
    def job() -> None:
        ran.append(1)

    job.send_with_options(anarchon_job="job", anarchon_slot=1000, anarchon_attempt=1,
                          anarchon_owner="nobody")
    job.send()  # no anarchon options: ignored by the middleware
    worker = Worker(broker, worker_timeout=50)
    worker.start()
    try:
        broker.join(job.queue_name, fail_fast=False)
        worker.join()
    finally:
        worker.stop()
        middleware.close()
    assert ran == [1]


def test_run_info_reads_the_slot_and_data_inside_the_actor(broker: StubBroker,
                                                           db: str) -> None:
    seen: list[ad.RunInfo | None] = []

    @ad.every("1s", data={"region": "eu"})
    @dramatiq.actor(broker=broker)
    def tick() -> None:
        seen.append(ad.run_info())

    worker = Worker(broker, worker_timeout=50)
    worker.start()
    try:
        run_scheduler(db, broker, lambda: len(seen) >= 1, 10)
        scheduler = anarchon.Scheduler(SqliteBackend(database=db))
        ad.register_actors(scheduler, broker)
        scheduler.run_now("tick", data={"extra": 1})  # merged with the mark's data
        scheduler.close()
        broker.join(tick.queue_name, fail_fast=False)
        worker.join()
    finally:
        worker.stop()
    info = seen[0]
    assert info is not None and info.job == "tick" and info.attempt == 1
    assert info.slot % 1000 == 0 and info.data == {"region": "eu"}
    assert seen[-1] is not None and seen[-1].data == {"region": "eu", "extra": 1}
    assert ad.run_info(object()) is None


def test_message_skipped_by_age_limit_is_a_failure(broker: StubBroker, db: str) -> None:
    middleware = ad.install_middleware(broker, f"sqlite:///{db}", lease=2, heartbeat=0.3)
    ran: list[int] = []

    @ad.every("1s", track=True, max_age=1)  # max_age: a message option (milliseconds)
    @dramatiq.actor(broker=broker)
    def stale() -> None:
        ran.append(1)

    run_scheduler(db, broker, lambda: broker.queues[stale.queue_name].qsize() >= 1, 10)
    time.sleep(0.01)  # older than its 1 ms age limit
    worker = Worker(broker, worker_timeout=50)
    worker.start()
    try:
        broker.join(stale.queue_name, fail_fast=False)
        worker.join()
    finally:
        worker.stop()
        middleware.close()
    assert ran == []
    finished = [r for r in history_of(db, "stale") if r.status != "running"]
    assert finished and finished[0].status == "failure"
    assert "skipped" in (finished[0].error or "")


def test_cli_loads_the_named_broker_and_refuses_bad_setups(db: str,
                                                           capsys: pytest.CaptureFixture[str]
                                                           ) -> None:
    from anarchon_dramatiq import cli
    from tests.harness.dramatiq import stub_app

    assert cli.load(["tests.harness.dramatiq.stub_app:broker"], []) is stub_app.broker
    scheduler = ad.build_scheduler(f"sqlite:///{db}", stub_app.broker, lease=2,
                                   heartbeat=0.5)
    assert scheduler.job_names == ["hourly"]
    assert cli.main(["tests.harness.dramatiq.stub_app:empty_broker",
                     "--backend", f"sqlite:///{db}"]) == 2
    assert "no Dramatiq actor is marked" in capsys.readouterr().err
    assert cli.main(["tests.harness.dramatiq.stub_app:broker", "--backend",
                     f"sqlite:///{db}", "--lease", "1", "--heartbeat", "2"]) == 2
    assert "heartbeat" in capsys.readouterr().err
    assert cli.main(["tests.harness.dramatiq.stub_app:nothing", "--backend",
                     f"sqlite:///{db}"]) == 2
