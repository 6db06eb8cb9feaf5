"""Actors as handlers of dynamic jobs (``dramatiq:<actor_name>``) on Dramatiq's StubBroker
and a real (SQLite) store; the params rule. Real brokers and processes:
``test_dynamic.py``."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import dramatiq
import pytest
from dramatiq import Broker, Middleware
from dramatiq.brokers.stub import StubBroker
from dramatiq.message import Message

import anarchon_dramatiq as ad
from anarchon import AsyncScheduler, SqliteBackend
from tests.harness.dramatiq.fixtures import history_of
from tests.support import wait_until


@pytest.mark.parametrize(("params", "args", "kwargs"), [
    (None, (), {}),
    ([], (), {}),
    ([1, "a", {"x": 2}], (1, "a", {"x": 2}), {}),
    ({"tenant": 7, "full": True}, (), {"tenant": 7, "full": True}),
    ({}, (), {}),
    ({"args": [1, 2]}, (1, 2), {}),
    ({"kwargs": {"k": "v"}}, (), {"k": "v"}),
    ({"args": [1], "kwargs": {"k": "v"}}, (1,), {"k": "v"}),
    ({"kwargs": {"args": [1]}}, (), {"args": [1]}),  # a keyword argument named args
])
def test_params_rule(params: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    assert ad.message_arguments(params, "job", "actor") == (args, kwargs)


@pytest.mark.parametrize(("params", "error"), [
    ("text", "params must be a list (args), an object (kwargs)"),
    (3, "got int 3"),
    (True, "got bool True"),
    ({"args": [1], "tenant": 7}, "mixes 'args'/'kwargs' with other keys ['tenant']"),
    ({"args": {"a": 1}}, "'args' must be a list, got dict"),
    ({"kwargs": [1]}, "'kwargs' must be an object, got list"),
    ({"not valid": 1}, "keyword argument names must be identifiers"),
])
def test_params_refused(params: Any, error: str) -> None:
    with pytest.raises(ad.ParamsError, match="dynamic job 'job' \\(handler 'dramatiq:actor'\\)"
                       ) as info:
        ad.message_arguments(params, "job", "actor")
    assert error in str(info.value)


class Sent(Middleware):
    """Every message the scheduler enqueues."""

    def __init__(self) -> None:
        self.messages: list[Message[Any]] = []

    def after_enqueue(self, broker: Broker, message: Message[Any], delay: int) -> None:
        self.messages.append(message)


def test_every_actor_is_a_handler_and_params_become_arguments(
        broker: StubBroker, db: str, caplog: pytest.LogCaptureFixture) -> None:
    sent = Sent()
    broker.add_middleware(sent)

    @dramatiq.actor(broker=broker, queue_name="reports")
    def report(*args: Any, **kwargs: Any) -> None: ...

    @ad.every("1h")
    @dramatiq.actor(broker=broker)
    def hourly() -> None: ...

    async def main() -> None:
        scheduler = AsyncScheduler(SqliteBackend(database=db), lease=2, heartbeat=0.3,
                                   jitter=0, instance_id="me")
        assert ad.register_actors(scheduler, broker) == ["hourly"]
        await scheduler.add_job("dyn", handler="dramatiq:report", every=1,
                                params={"args": [1], "kwargs": {"k": "v"}})
        await scheduler.add_job("broken", handler="dramatiq:report", every=1,
                                params="not arguments")
        await scheduler.start()
        try:
            await wait_until(lambda: len(sent.messages) >= 2, 10, "two messages of 'dyn'")
            offered = await scheduler.offered_handlers()
            assert offered == {"me": ["dramatiq:hourly", "dramatiq:report"]}
            await wait_until(lambda: any(r.status == "failure"
                                         for r in history_of(db, "broken")), 10,
                             "the failed run of 'broken'")
        finally:
            await scheduler.stop()

    with caplog.at_level(logging.ERROR, logger="anarchon.dramatiq"):
        asyncio.run(main())
    messages = [m for m in sent.messages if m.options["anarchon_job"] == "dyn"]
    assert messages and len(messages) == len(sent.messages), "nothing sent for 'broken'"
    assert {(m.actor_name, m.queue_name) for m in messages} == {("report", "reports")}
    assert all((tuple(m.args), m.kwargs) == ((1,), {"k": "v"}) for m in messages)
    slots = [m.options["anarchon_slot"] for m in messages]
    assert len(set(slots)) == len(slots) and all(s % 1000 == 0 for s in slots)
    assert "anarchon_owner" not in messages[0].options  # untracked: finished when sent
    assert {r.status for r in history_of(db, "dyn")} == {"success"}
    failed = next(r for r in history_of(db, "broken") if r.status == "failure")
    assert failed.error is not None and "params must be a list" in failed.error
    logged = [r.getMessage() for r in caplog.records if "'broken'" in r.getMessage()]
    assert logged and "params must be a list" in logged[0], logged


def test_build_scheduler_runs_unmarked_actors_as_handlers_only(broker: StubBroker,
                                                               db: str) -> None:
    @dramatiq.actor(broker=broker)
    def plain() -> None: ...

    scheduler = ad.build_scheduler(f"sqlite:///{db}", broker)
    assert scheduler.job_names == []
    with pytest.raises(ValueError, match="no Dramatiq actor is marked"):
        ad.build_scheduler(f"sqlite:///{db}", StubBroker())
