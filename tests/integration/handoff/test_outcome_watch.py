"""The one outcome watch (``anarchon.handoff.outcomes``) both layers use: once
``queue_lease`` has passed after a tracked send, a run a worker took over (its lease
renewed, or its outcome recorded) is left alone, and a run nobody took over is reported:
``ever`` False while no worker has recorded any outcome of the job (a configuration
error), True after one did (a backlog or a lost worker); the run then ends
``interrupted``. A real scheduler on SQLite; the "broker" is a list and the "worker" an
``AsyncTracker``."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from anarchon import AsyncScheduler, AsyncTracker, RunContext, RunToken, SqliteBackend
from anarchon.handoff.outcomes import MissingOutcome, OutcomeWatch
from anarchon.handoff.sender import Handoff
from anarchon.testing.support import wait_until

QUEUE_LEASE = 0.5


class _ListSender(Handoff[dict[str, Any]]):
    def __init__(self, **options: Any) -> None:
        super().__init__(track=True, queue_lease=QUEUE_LEASE, max_late=30, **options)
        self.messages: list[dict[str, Any]] = []

    def message(self, ctx: RunContext, headers: dict[str, Any]) -> dict[str, Any]:
        return headers

    def send(self, ctx: RunContext, message: dict[str, Any]) -> Any:
        self.messages.append(message)


class _Watch(OutcomeWatch):
    """The watch, its judgments and reports kept."""

    def __init__(self, engine: AsyncScheduler) -> None:
        self.reports: list[MissingOutcome] = []
        self.judged: list[tuple[int, MissingOutcome | None]] = []
        super().__init__(engine, self.reports.append)

    async def judge(self, name: str, slot: int, attempt: int, queue_lease: float,
                    resend: bool = False) -> MissingOutcome | None:
        found = await super().judge(name, slot, attempt, queue_lease, resend)
        self.judged.append((slot, found))
        return found


def _start(db: str) -> tuple[AsyncScheduler, _ListSender, _Watch]:
    engine = AsyncScheduler(SqliteBackend(database=db), lease=1, heartbeat=0.2, jitter=0,
                            instance_id="me")
    watch = _Watch(engine)
    sender = _ListSender(engine=engine, watch=watch)
    engine.every("tick", 1, sender, max_attempts=1)
    return engine, sender, watch


def test_a_tracked_message_nobody_takes_over_is_a_configuration_error(db: str) -> None:
    async def main() -> None:
        engine, sender, watch = _start(db)
        await engine.start()
        try:
            await wait_until(lambda: bool(watch.reports), 10, "the report of the first send")
            first = sender.messages[0]["anarchon_slot"]
            assert watch.reports[0] == MissingOutcome("tick", first, 1, QUEUE_LEASE, False,
                                                      False, "sqlite")
            deadline = time.monotonic() + 10
            while {r.status for r in await engine.history("tick", 50)
                   if r.slot == first} != {"interrupted"}:
                assert time.monotonic() < deadline, "the unreported run never ended"
                await asyncio.sleep(0.05)
        finally:
            await engine.stop()

    asyncio.run(main())


def test_a_run_a_worker_took_over_is_left_alone_and_a_later_loss_is_a_warning(
        db: str) -> None:
    async def main() -> None:
        engine, sender, watch = _start(db)
        tracker = AsyncTracker(engine.backend, lease=1, heartbeat=0.2)
        await engine.start()
        try:
            await wait_until(lambda: bool(sender.messages), 10, "the first message")
            token = RunToken.from_headers(sender.messages[0])
            assert token is not None
            await tracker.begin(token)  # the worker renews its lease while it runs
            await wait_until(lambda: any(s == token.slot for s, _ in watch.judged), 10,
                             "the check of the first send")
            assert watch.judged[0] == (token.slot, None) and not watch.reports
            await tracker.end(token, "success")
            # the next messages nobody takes over: reported, after an outcome arrived
            await wait_until(lambda: bool(watch.reports), 10, "the report of a later send")
            assert all(r.ever and r.slot > token.slot for r in watch.reports)
        finally:
            await engine.stop()
            await tracker.close()

    asyncio.run(main())
