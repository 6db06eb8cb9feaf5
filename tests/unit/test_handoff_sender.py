"""The hand-off's sequence (``anarchon.handoff.sender.Handoff``), once for every layer:
headers (a tracked run detached), then for each try the lease check and the layer's
``send``, retried until ``max_late``; a refused lease sends nothing and is not retried;
the outcome watch hears of each tracked send, never of a manual run. Pure logic: a
layer that "sends" into a list, a stand-in for the core's ``lease_remaining``."""

from __future__ import annotations

import logging
import time
from typing import Any

import pytest

from anarchon import Aborted, AbortSignal, RunContext
from anarchon.handoff import retry
from anarchon.handoff.sender import Handoff
from anarchon.schedules.kinds import ms_to_datetime

#: a slot due now (max_late counts from it)
SLOT = int(time.time() * 1000)


def _ctx(manual: bool = False, attempt: int = 1, slot: int = SLOT) -> RunContext:
    return RunContext("tick", slot, ms_to_datetime(slot), "me", manual, attempt,
                      "manual" if manual else "scheduled", AbortSignal(), None)


class _Engine:
    """The core's ``lease_remaining`` as the fence reads it: ``remaining`` seconds left
    (``None``: no lease to judge); every read is logged in ``steps``."""

    def __init__(self, steps: list[str], remaining: float | None = 10.0) -> None:
        self.steps = steps
        self.remaining = remaining

    def lease_remaining(self, name: str, slot: int, attempt: int | None = None
                        ) -> float | None:
        self.steps.append("fence")
        return self.remaining


def _engine(steps: list[str], remaining: float | None = 10.0) -> Any:
    return _Engine(steps, remaining)


class _Watch:
    def __init__(self) -> None:
        self.expected: list[tuple[Any, ...]] = []

    def expect(self, name: str, slot: int, attempt: int, queue_lease: float, *,
               resend: bool = False) -> None:
        self.expected.append((name, slot, attempt, queue_lease, resend))


class _ListSender(Handoff[dict[str, Any]]):
    """A layer whose broker is a list; its first ``refusals`` sends raise."""

    def __init__(self, steps: list[str], refusals: int = 0, **options: Any) -> None:
        options.setdefault("track", False)
        options.setdefault("queue_lease", 60.0)
        options.setdefault("max_late", 3600.0)
        super().__init__(**options)
        self.steps = steps
        self.refusals = refusals
        self.messages: list[dict[str, Any]] = []
        self.outcomes: list[str] = []

    def message(self, ctx: RunContext, headers: dict[str, Any]) -> dict[str, Any]:
        self.steps.append("message")
        return {"body": ctx.name, **headers}

    def send(self, ctx: RunContext, message: dict[str, Any]) -> Any:
        self.steps.append("send")
        if self.refusals > 0:
            self.refusals -= 1
            raise ConnectionError("broker down (test)")
        self.messages.append(message)
        return len(self.messages)

    def sent(self, ctx: RunContext, result: Any) -> None:
        self.outcomes.append(f"sent {result}")

    def refused(self, ctx: RunContext, exc: Aborted) -> None:
        self.outcomes.append(f"refused {exc.reason}")

    def failed(self, ctx: RunContext, exc: Exception) -> None:
        self.outcomes.append(f"failed {exc}")


@pytest.fixture(autouse=True)
def quick_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(retry, "FIRST_RETRY", 0.01)


def test_each_try_is_fenced_and_a_failed_send_is_retried(caplog: pytest.LogCaptureFixture
                                                         ) -> None:
    steps: list[str] = []
    sender = _ListSender(steps, refusals=2, engine=_engine(steps), margin=(1.0, 0.0))
    with caplog.at_level(logging.WARNING, "anarchon.handoff"):
        sender(_ctx())
    assert steps == ["message", "fence", "send", "fence", "send", "fence", "send"]
    assert len(sender.messages) == 1 and sender.outcomes == ["sent 1"]
    retries = [r.getMessage() for r in caplog.records if "retrying in" in r.getMessage()]
    assert len(retries) == 2 and all(f"job 'tick' slot {SLOT}: send failed" in line
                                     for line in retries), retries


def test_a_refused_lease_sends_nothing_and_is_not_retried() -> None:
    steps: list[str] = []
    sender = _ListSender(steps, engine=_engine(steps, remaining=0.0), margin=(1.0, 0.0))
    with pytest.raises(Aborted):
        sender(_ctx())
    assert steps == ["message", "fence"] and sender.messages == []
    assert sender.outcomes == ["refused lost"]


def test_without_a_lease_to_judge_or_an_engine_the_send_goes_ahead() -> None:
    steps: list[str] = []
    _ListSender(steps, engine=_engine(steps, remaining=None), margin=(1.0, 0.0))(_ctx())
    assert steps == ["message", "fence", "send"]
    steps.clear()
    _ListSender(steps)(_ctx())
    assert steps == ["message", "send"]


def test_a_send_failing_past_max_late_fails_the_run_after_one_report() -> None:
    steps: list[str] = []
    slot = int((time.time() - 10) * 1000)  # 10 s late already, max_late 1 s
    sender = _ListSender(steps, refusals=99, max_late=1.0)
    with pytest.raises(ConnectionError):
        sender(_ctx(slot=slot))
    assert steps == ["message", "send"]
    assert sender.outcomes == ["failed broker down (test)"]


def test_a_tracked_run_is_detached_and_watched() -> None:
    steps: list[str] = []
    watch: Any = _Watch()
    sender = _ListSender(steps, track=True, queue_lease=5.0, watch=watch, resend=True)
    ctx = _ctx(attempt=2)
    sender(ctx)
    assert ctx.detached_lease == 5.0
    message = sender.messages[0]
    assert (message["anarchon_job"], message["anarchon_slot"], message["anarchon_attempt"],
            message["anarchon_owner"]) == ("tick", SLOT, 2, "me")
    assert watch.expected == [("tick", SLOT, 2, 5.0, True)]


def test_a_manual_run_is_neither_detached_nor_fenced_nor_watched() -> None:
    steps: list[str] = []
    watch: Any = _Watch()
    sender = _ListSender(steps, track=True, watch=watch,
                         engine=_engine(steps, remaining=0.0), margin=(1.0, 0.0))
    ctx = _ctx(manual=True)
    sender(ctx)
    assert ctx.detached_lease is None and "anarchon_owner" not in sender.messages[0]
    assert steps == ["message", "send"] and watch.expected == []


def test_an_untracked_run_carries_job_slot_and_attempt_only() -> None:
    watch: Any = _Watch()
    sender = _ListSender([], watch=watch)
    ctx = _ctx()
    sender(ctx)
    assert ctx.detached_lease is None and watch.expected == []
    assert {k for k in sender.messages[0] if k.startswith("anarchon_")} == {
        "anarchon_job", "anarchon_slot", "anarchon_attempt"}


def test_the_default_log_lines_name_the_job(caplog: pytest.LogCaptureFixture) -> None:
    class Plain(Handoff[None]):
        def message(self, ctx: RunContext, headers: dict[str, Any]) -> None:
            return None

        def send(self, ctx: RunContext, message: None) -> Any:
            raise ConnectionError("down")

    steps: list[str] = []
    with caplog.at_level(logging.WARNING, "anarchon.handoff"):
        with pytest.raises(Aborted):
            Plain(track=False, queue_lease=1, max_late=60, engine=_engine(steps, 0.0),
                  margin=(1.0, 0.0))(_ctx())
        with pytest.raises(ConnectionError):
            Plain(track=False, queue_lease=1, max_late=0)(
                _ctx(slot=int((time.time() - 10) * 1000)))
    lines = [r.getMessage() for r in caplog.records]
    assert (f"job 'tick' slot {SLOT} attempt 1: not sent, this instance no longer holds "
            "the slot (lease not confirmed: lost)") in lines
    assert any("send failed, slot is now past max_late: down" in line for line in lines)


def test_what_a_try_prepares_comes_before_its_lease_check() -> None:
    """Slow work (Celery's lazy arguments) must not sit between the check and the send."""
    class Preparing(_ListSender):
        def prepare(self, ctx: RunContext, message: dict[str, Any]) -> dict[str, Any]:
            self.steps.append("prepare")
            return {**message, "prepared": True}

    steps: list[str] = []
    sender = Preparing(steps, refusals=1, engine=_engine(steps), margin=(1.0, 0.0))
    sender(_ctx())
    assert steps == ["message", "prepare", "fence", "send", "prepare", "fence", "send"]
    assert sender.messages[0]["prepared"] is True
