"""Notice tracked messages whose outcome never arrives, once for every framework layer.

A tracked run stays open for ``queue_lease`` after its message is sent, until a worker
takes it over (renews its lease, then records the outcome). By default (``resend`` off)
a run nobody took over is not sent again: it ends ``interrupted`` once that lease
expires. [`OutcomeWatch`][anarchon.handoff.outcomes.OutcomeWatch] looks at the run then
(``queue_lease`` + a heartbeat + ``CHECK_MARGIN`` after the send) and, finding neither an
outcome nor a lease a worker renews, hands a
[`MissingOutcome`][anarchon.handoff.outcomes.MissingOutcome] to the layer's ``report``:
``ever`` False (no worker ever recorded an outcome of the job) is a configuration error
(the workers do not track), True a backlog in the queue or a lost worker. One check per
job is pending at a time (a configuration error repeats on every slot).

The checks run as tasks on the scheduler's event loop (learnt from its ``start``
events): the same in an asyncio application, ``anarchon-dramatiq`` and a Celery beat,
whose core runs on a loop thread of its own.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..backends.base import LeaseBackend
from ..events import Event

if TYPE_CHECKING:
    from ..engine.scheduler import AsyncScheduler

logger = logging.getLogger("anarchon.handoff")

#: after ``queue_lease``, wait this long (plus one heartbeat) before judging: a backup's
#: takeover or a worker's first renewal may be that late
CHECK_MARGIN = 0.5
#: history records read to find the run and any earlier outcome of the job
READ = 50


@dataclass(frozen=True)
class MissingOutcome:
    """A tracked run no worker took over within ``queue_lease``."""

    name: str
    slot: int
    attempt: int
    queue_lease: float
    #: whether a backup sends the slot again (the job's ``resend``)
    resend: bool
    #: whether a worker ever recorded an outcome of the job (False: the workers do not
    #: track, a configuration error)
    ever: bool
    #: the store's name (where the workers must record outcomes)
    store: str


Report = Callable[[MissingOutcome], None]


class OutcomeWatch:
    """Checks that tracked messages' outcomes reach the store (see the module docstring).

    Listens to ``engine``'s ``start`` events (to learn its loop); the sender calls
    [`expect()`][anarchon.handoff.outcomes.OutcomeWatch.expect] after each tracked send;
    ``report`` says what a missing outcome means, in the layer's words.
    """

    def __init__(self, engine: AsyncScheduler, report: Report) -> None:
        self.engine = engine
        self.report = report
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closed = False
        #: jobs with a check pending (one at a time per job)
        self._pending: set[str] = set()
        self._checks: set[asyncio.Task[None]] = set()
        engine.on("start", self.on_start)

    def on_start(self, event: Event) -> None:
        """Listener for ``start`` events: runs on the scheduler's loop."""
        self._loop = asyncio.get_running_loop()

    def expect(self, name: str, slot: int, attempt: int, queue_lease: float, *,
               resend: bool = False) -> None:
        """Check run ``(name, slot, attempt)`` once ``queue_lease`` has passed
        (thread-safe; nothing on a store without leases)."""
        loop = self._loop
        if loop is None or self._closed or not isinstance(self.engine.backend, LeaseBackend):
            return
        wait = queue_lease + self.engine.options.heartbeat + CHECK_MARGIN

        def arm() -> None:
            if name not in self._pending:
                self._pending.add(name)
                loop.call_later(wait, self._spawn, name, slot, attempt, queue_lease, resend)

        try:
            loop.call_soon_threadsafe(arm)
        except RuntimeError:  # the loop is closed: the scheduler stopped
            return

    def close(self) -> None:
        """Arm no more checks (those pending end with the scheduler)."""
        self._closed = True

    def _spawn(self, name: str, slot: int, attempt: int, queue_lease: float,
               resend: bool) -> None:
        if self.engine.running and not self._closed:
            task = asyncio.ensure_future(self._check(name, slot, attempt, queue_lease,
                                                     resend))
            self._checks.add(task)
            task.add_done_callback(self._checks.discard)
        else:
            self._pending.discard(name)

    async def _check(self, name: str, slot: int, attempt: int, queue_lease: float,
                     resend: bool) -> None:
        try:
            missing = await self.judge(name, slot, attempt, queue_lease, resend)
            if missing is not None:
                self.report(missing)
        except Exception as exc:  # the store is down: its errors are reported elsewhere
            logger.debug("job %r slot %s: outcome check failed: %s", name, slot, exc)
        finally:
            self._pending.discard(name)

    async def judge(self, name: str, slot: int, attempt: int, queue_lease: float,
                    resend: bool = False) -> MissingOutcome | None:
        """What is missing of run ``(name, slot, attempt)`` now: ``None`` when a worker
        recorded its outcome or renews its lease (or the run is out of sight)."""
        backend = self.engine.backend
        if not self.engine.running or not isinstance(backend, LeaseBackend):
            return None
        records = await self.engine.history(name, READ)
        record = next((r for r in records if r.slot == slot and r.attempt == attempt
                       and not r.manual), None)
        if record is None or record.status in ("success", "failure"):
            return None  # reported (or trimmed from history already: nothing to judge)
        if record.status == "running":
            states = await backend.unfinished([name])
            state = next((s for s in states if s.slot == slot and s.attempt == attempt),
                         None)
            if state is not None and not state.lease_expired:
                return None  # a worker renews the lease: it took the run over
        ever = any(r.status in ("success", "failure") and not r.manual for r in records)
        return MissingOutcome(name, slot, attempt, queue_lease, resend, ever, backend.name)


__all__ = ["CHECK_MARGIN", "READ", "MissingOutcome", "OutcomeWatch", "Report"]
