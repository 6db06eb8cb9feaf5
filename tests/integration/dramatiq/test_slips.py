"""Configuration slips caught where they are made, on Dramatiq's StubBroker and a real
(SQLite) store: refused options, the tracked-mark rules, logged skips and failed sends."""

from __future__ import annotations

import logging
import time
from typing import Any

import dramatiq
import pytest
from dramatiq import Middleware, Worker
from dramatiq.brokers.stub import StubBroker
from dramatiq.message import Message

import anarchon
import anarchon_dramatiq as ad
from anarchon import SqliteBackend
from tests.harness.dramatiq.fixtures import history_of, run_scheduler

# -- refused at declaration ------------------------------------------------------------------

def _fn() -> None: ...


@pytest.mark.parametrize("typo", ["max_retrys", "jiter"])
def test_unknown_option_is_a_type_error_naming_it_and_the_known_ones(typo: str) -> None:
    options: dict[str, Any] = {typo: 3}
    with pytest.raises(TypeError, match=typo) as caught:
        ad.every("5s", **options)(_fn)
    text = str(caught.value)
    assert "max_retries" in text and "jitter" in text and "queue_lease" in text


def test_an_option_of_the_actors_own_middleware_is_accepted(broker: StubBroker) -> None:
    class Tagging(Middleware):
        @property
        def actor_options(self) -> set[str]:
            return {"tag"}

    broker.add_middleware(Tagging())

    @ad.every("5s", tag="x")
    @dramatiq.actor(broker=broker)
    def tagged() -> None: ...

    assert ad.marks_of(tagged)[0].message_options == {"tag": "x"}


def test_a_message_option_the_broker_lacks_is_refused_on_registration(
        broker: StubBroker, db: str) -> None:
    @dramatiq.actor(broker=broker)
    @ad.every("5s", store_results=True)  # Results middleware: not on this broker
    def stored() -> None: ...

    with pytest.raises(TypeError, match="store_results"):
        ad.register_actors(anarchon.Scheduler(SqliteBackend(database=db)), broker)


def test_priority_is_refused_pointing_at_the_actor() -> None:
    with pytest.raises(TypeError, match=r"@dramatiq.actor\(priority="):
        ad.every("5s", priority=5)


def test_delay_not_shorter_than_queue_lease_is_refused() -> None:
    with pytest.raises(ValueError, match="queue_lease"):
        ad.every("5s", track=True, delay=2000, queue_lease=2)
    ad.every("5s", track=True, delay=1000, queue_lease=2)  # shorter: fine
    ad.every("5s", delay=5000)  # untracked: no lease to outlast


def test_delay_is_checked_against_the_registering_default_lease(broker: StubBroker,
                                                                db: str) -> None:
    @ad.every("5s", delay=3000)
    @dramatiq.actor(broker=broker)
    def later() -> None: ...

    with pytest.raises(ValueError, match="queue_lease"):
        ad.register_actors(anarchon.Scheduler(SqliteBackend(database=db)), broker,
                           track=True, queue_lease=2)


def test_two_anonymous_marks_are_refused_asking_for_name(broker: StubBroker) -> None:
    with pytest.raises(ValueError, match="name="):
        @ad.every("5s")
        @ad.cron("0 * * * *")
        @dramatiq.actor(broker=broker)
        def twice() -> None: ...


def test_named_second_mark_is_fine(broker: StubBroker) -> None:
    @ad.every("5s")
    @ad.cron("0 * * * *", name="hourly")
    @dramatiq.actor(broker=broker)
    def twice() -> None: ...

    assert len(ad.marks_of(twice)) == 2


def test_tracked_max_attempts_without_resend_is_refused() -> None:
    with pytest.raises(TypeError, match="resend=True"):
        ad.every("5s", track=True, max_attempts=3)
    ad.every("5s", track=True, max_attempts=3, resend=True)
    with pytest.raises(TypeError, match="track=True"):
        ad.every("5s", track=False, resend=True)


# -- applied on registration -----------------------------------------------------------------

def test_tracked_marks_send_each_slot_once_unless_they_ask(broker: StubBroker,
                                                           db: str) -> None:
    @ad.every("5s", track=True)
    @dramatiq.actor(broker=broker)
    def once() -> None: ...

    @ad.every("5s", track=True, resend=True)
    @dramatiq.actor(broker=broker)
    def again() -> None: ...

    @ad.every("5s")
    @dramatiq.actor(broker=broker)
    def plain() -> None: ...

    scheduler = anarchon.Scheduler(SqliteBackend(database=db))
    ad.register_actors(scheduler, broker)
    jobs = {job.name: job for job in scheduler.core.runtime.jobs.values()}
    assert jobs["once"].max_attempts == 1
    assert jobs["again"].max_attempts == 3 and jobs["plain"].max_attempts == 3


def test_cron_marks_without_timezone_use_utc_under_any_scheduler(broker: StubBroker,
                                                                 db: str) -> None:
    @ad.cron("0 6 * * *")
    @dramatiq.actor(broker=broker)
    def morning() -> None: ...

    scheduler = anarchon.Scheduler(SqliteBackend(database=db), timezone="America/New_York")
    ad.register_actors(scheduler, broker)
    upcoming = scheduler.next_run("morning")
    assert upcoming is not None and upcoming.astimezone(anarchon_utc()).hour == 6


def anarchon_utc() -> Any:
    from datetime import timezone

    return timezone.utc


def test_queue_nobody_declares_is_a_warning(broker: StubBroker, db: str,
                                            caplog: pytest.LogCaptureFixture) -> None:
    @ad.every("5s", queue_name="nowhere")
    @dramatiq.actor(broker=broker)
    def lost() -> None: ...

    @ad.every("5s", queue_name="reports", name="fine")
    @dramatiq.actor(broker=broker)
    def sent() -> None: ...

    @dramatiq.actor(broker=broker, queue_name="reports")
    def consumer() -> None: ...

    with caplog.at_level(logging.WARNING, "anarchon.dramatiq"):
        ad.register_actors(anarchon.Scheduler(SqliteBackend(database=db)), broker)
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warned) == 1 and "'nowhere'" in warned[0] and "never processed" in warned[0]


# -- history_size reaches the worker ----------------------------------------------------

def test_history_size_applies_to_tracked_marks(broker: StubBroker, db: str) -> None:
    middleware = ad.install_middleware(broker, f"sqlite:///{db}", lease=2, heartbeat=0.3)
    done: list[int] = []

    @ad.every("1s", track=True, history_size=2)
    @dramatiq.actor(broker=broker)
    def short() -> None:
        done.append(1)

    worker = Worker(broker, worker_timeout=50)
    worker.start()
    try:
        run_scheduler(db, broker, lambda: len(done) >= 4, 15)
        broker.join(short.queue_name, fail_fast=False)
        worker.join()
    finally:
        worker.stop()
        middleware.close()
    finished = [r for r in history_of(db, "short") if r.status != "running"]
    assert len(finished) == 2


# -- nothing silent ----------------------------------------------------------------------------

class DownBroker(StubBroker):
    """A broker whose server does not answer (Dramatiq swallows middleware errors in
    ``before_enqueue``, so the failure has to come from the broker itself)."""

    def enqueue(self, message: Message[Any], *, delay: int | None = None) -> Message[Any]:
        raise ConnectionError("broker unreachable (test)")


def test_failed_send_is_logged_at_error_and_recorded(db: str,
                                                     caplog: pytest.LogCaptureFixture
                                                     ) -> None:
    """The send is retried until the slot is ``max_late`` late, then fails the run."""
    broker = DownBroker()

    @ad.every("1s", max_attempts=1, max_late="3s")
    @dramatiq.actor(broker=broker)
    def doomed() -> None: ...

    with caplog.at_level(logging.INFO, "anarchon.dramatiq"):
        run_scheduler(db, broker,
                      lambda: any(r.status == "failure" for r in history_of(db, "doomed")), 20)
    errors = [r.getMessage() for r in caplog.records
              if r.levelno == logging.ERROR and r.name == "anarchon.dramatiq"]
    assert errors and "sending to queue 'default' failed" in errors[0]
    assert "ConnectionError: broker unreachable (test)" in errors[0]
    failed = [r for r in history_of(db, "doomed") if r.status == "failure"]
    assert "broker unreachable (test)" in (failed[0].error or "")


def test_overlap_skips_are_logged_at_warning_and_recorded(
        broker: StubBroker, db: str, caplog: pytest.LogCaptureFixture) -> None:
    """A tracked run nobody finishes holds its queue_lease: the slots meanwhile are
    skipped, each one logged and recorded in history (status ``skipped``)."""
    @ad.every("1s", track=True, queue_lease=3)
    @dramatiq.actor(broker=broker)  # no worker, no middleware: nothing finishes it
    def held() -> None: ...

    def skipped() -> list[str]:
        return [r.getMessage() for r in caplog.records if "skipped" in r.getMessage()]

    with caplog.at_level(logging.DEBUG, "anarchon.dramatiq"):
        run_scheduler(db, broker, lambda: len(skipped()) >= 2, 10)
    warnings = [r for r in caplog.records if "skipped" in r.getMessage()]
    assert all(r.levelno == logging.WARNING for r in warnings)
    assert "overlap" in warnings[0].getMessage()
    records = [r for r in history_of(db, "held") if r.status == "skipped"]
    assert len(records) >= 2 and {r.reason for r in records} == {"overlap"}, records
    assert {r.attempt for r in records} == {0}
    assert len({r.slot for r in records}) == len(records)


@pytest.mark.parametrize("with_middleware", [True, False])
def test_missing_outcomes_are_a_configuration_error_after_queue_lease(
        broker: StubBroker, db: str, caplog: pytest.LogCaptureFixture,
        with_middleware: bool) -> None:
    """Once queue_lease has passed after a tracked send, the scheduler checks that the
    worker recorded the outcome; without the middleware it logs a configuration error."""
    middleware = (ad.install_middleware(broker, f"sqlite:///{db}", lease=2, heartbeat=0.3)
                  if with_middleware else None)
    done: list[float] = []

    @ad.every("1s", track=True, queue_lease=0.5)
    @dramatiq.actor(broker=broker)
    def quick() -> None:
        done.append(time.monotonic())

    def errors() -> list[logging.LogRecord]:
        return [r for r in caplog.records if r.levelno == logging.ERROR]

    worker = Worker(broker, worker_timeout=50)
    worker.start()
    try:
        with caplog.at_level(logging.INFO, "anarchon.dramatiq"):
            # the first check is due 0.5 + 0.3 + 0.5 s after the first send
            run_scheduler(db, broker, lambda: bool(errors()) or (
                bool(done) and time.monotonic() - done[0] > 2.5), 15)
    finally:
        worker.stop()
        if middleware is not None:
            middleware.close()
    finished = {r.status for r in history_of(db, "quick")
                if r.status not in ("running", "skipped")}
    if with_middleware:
        assert not errors() and "no outcome" not in caplog.text
        assert finished == {"success"}
    else:
        assert errors() and all("configuration error" in e.getMessage()
                                and "AnarchonMiddleware" in e.getMessage() for e in errors())
        assert finished <= {"interrupted"}
