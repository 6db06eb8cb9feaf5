"""The whole hand-off of one won slot, once for every framework layer.

[`Handoff`][anarchon.handoff.sender.Handoff] turns the slot this instance won into one
task-queue message:

1. the run's ``anarchon_*`` headers ([`run_headers()`][anarchon.handoff.headers.run_headers];
   a tracked run is detached, a worker finishes it) and the run span's ``traceparent``;
2. the framework's message built around them
   ([`message()`][anarchon.handoff.sender.Handoff.message]);
3. for each try: what takes time first
   ([`prepare()`][anarchon.handoff.sender.Handoff.prepare]), then the lease check
   ([`ensure_lease()`][anarchon.handoff.fence.ensure_lease]), then the framework's
   [`send()`][anarchon.handoff.sender.Handoff.send]; a failed try is retried with backoff
   until the slot is ``max_late`` late
   ([`send_until_late()`][anarchon.handoff.retry.send_until_late]);
4. once sent, a tracked run is handed to the outcome watch
   ([`OutcomeWatch.expect()`][anarchon.handoff.outcomes.OutcomeWatch.expect]).

A layer subclasses it and implements ``message()`` and ``send()`` (one try, no retry);
the hooks (``prepare``, ``describe``, ``refused``, ``failed``, ``sent``, ``through``,
``dispatch``) carry its log wording and its framework's plumbing. Nothing here imports a
framework.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from ..context import RunContext
from ..errors import Aborted
from ..observability.tracing import inject
from .fence import ensure_lease, send_margin
from .headers import run_headers
from .retry import send_until_late

if TYPE_CHECKING:
    from ..engine.scheduler import AsyncScheduler
    from .outcomes import OutcomeWatch

M = TypeVar("M")
R = TypeVar("R")

logger = logging.getLogger("anarchon.handoff")


class Handoff(ABC, Generic[M]):
    """Sends one message per won slot (see the module docstring); ``M`` is the layer's
    message (what its ``send()`` takes).

    ``engine``: the scheduler whose lease is checked before each try (``None``: no
    check); ``margin``: ``(margin, wait)`` of that check (default: from the engine's
    options, [`send_margin()`][anarchon.handoff.fence.send_margin]); ``watch``: told of each
    tracked send; ``resend``: whether a backup sends the slot again when no worker took
    it over (what the watch's report says).
    """

    #: the layer's logger (retries, refusals, failures)
    logger: logging.Logger = logger
    #: the action, in the retry lines (``"send"``, ``"publish"``)
    verb: str = "send"

    def __init__(self, *, track: bool, queue_lease: float, max_late: float,
                 engine: AsyncScheduler | None = None,
                 margin: tuple[float, float] | None = None,
                 watch: OutcomeWatch | None = None, resend: bool = False) -> None:
        self.track = track
        self.queue_lease = queue_lease
        self.max_late = max_late
        #: the scheduler whose lease is checked right before each try (None: unchecked)
        self.engine = engine
        self.margin = margin
        #: told of each tracked send, to report an outcome that never arrives
        self.watch = watch
        self.resend = resend

    # -- what a layer implements ------------------------------------------------------------

    @abstractmethod
    def message(self, ctx: RunContext, headers: dict[str, Any]) -> M:
        """The framework's message for run ``ctx``, carrying ``headers``."""

    @abstractmethod
    def send(self, ctx: RunContext, message: M) -> Any:
        """Send ``message`` once (no retry); raise what the broker raised."""

    # -- the sequence -----------------------------------------------------------------------

    def __call__(self, ctx: RunContext) -> None:
        headers = self.headers(ctx)
        inject(headers, ctx)  # the run span's traceparent (the otel extra)
        result = self.dispatch(ctx, self.message(ctx, headers))
        self.sent(ctx, result)
        self.expect_outcome(ctx)

    def tracked(self, ctx: RunContext) -> bool:
        """Whether this run is detached and finished by a worker (never a manual run:
        it holds no lease and finishes when its message is sent)."""
        return self.track and not ctx.manual

    def headers(self, ctx: RunContext) -> dict[str, Any]:
        """The ``anarchon_*`` headers of this attempt (detaching it when tracked)."""
        return run_headers(ctx, track=self.tracked(ctx), queue_lease=self.queue_lease)

    def fence(self, ctx: RunContext) -> None:
        """Return when this instance still holds the slot's lease (the last moment
        before a try); raises [`anarchon.Aborted`][anarchon.Aborted] when it does not."""
        if self.engine is None:
            return
        margin, wait = self.margin if self.margin is not None else send_margin(self.engine)
        ensure_lease(self.engine, ctx, margin, wait)

    def prepare(self, ctx: RunContext, message: M) -> M:
        """What one try needs that may take time (the layer's lazy arguments), done
        before the lease check so that nothing slow comes between the check and the
        send; default: ``message`` as it is."""
        return message

    def attempt(self, ctx: RunContext, message: M) -> Any:
        """One try: ``prepare()``, the lease check, then the framework's send."""
        ready = self.prepare(ctx, message)
        self.fence(ctx)
        return self.send(ctx, ready)

    def through(self, attempt: Callable[[], R]) -> R:
        """Run one try (``attempt()``) where the layer's sends must run (default: here;
        a layer with per-thread broker connections hands it to its send threads)."""
        return attempt()

    def deliver(self, ctx: RunContext, message: M) -> Any:
        """Send with retries while the slot is within ``max_late``, each try behind the
        lease check; raises the last error (after ``failed()``), or
        [`anarchon.Aborted`][anarchon.Aborted] (after ``refused()``) when the lease is gone."""
        try:
            return send_until_late(ctx, lambda: self.through(lambda: self.attempt(ctx, message)),
                                   self.max_late, self.logger, self.describe(ctx), self.verb,
                                   refused=lambda exc: self.refused(ctx, exc),
                                   give_up_log=False)
        except Aborted:
            raise
        except Exception as exc:
            self.failed(ctx, exc)
            raise

    def dispatch(self, ctx: RunContext, message: M) -> Any:
        """Deliver ``message`` (a layer may route it through its framework's own hooks,
        which must end in ``deliver()``); returns what the send returned."""
        return self.deliver(ctx, message)

    def expect_outcome(self, ctx: RunContext) -> None:
        """After a tracked send: the watch checks that a worker took the run over."""
        if self.watch is not None and self.tracked(ctx):
            self.watch.expect(ctx.name, ctx.slot, ctx.attempt, self.queue_lease,
                              resend=self.resend)

    # -- what a layer may say differently ---------------------------------------------------

    def describe(self, ctx: RunContext) -> str:
        """The job as the log lines name it."""
        return f"job {ctx.name!r}"

    def refused(self, ctx: RunContext, exc: Aborted) -> None:
        """The lease check refused a try: nothing was sent."""
        self.logger.warning("%s slot %s attempt %d: not sent, this instance no longer "
                            "holds the slot (lease not confirmed: %s)", self.describe(ctx),
                            ctx.slot, ctx.attempt, exc.reason)

    def failed(self, ctx: RunContext, exc: Exception) -> None:
        """The last try failed past ``max_late``: the run is recorded as failed."""
        self.logger.error("%s slot %s: %s failed, slot is now past max_late: %s",
                          self.describe(ctx), ctx.slot, self.verb, exc)

    def sent(self, ctx: RunContext, result: Any) -> None:
        """The message was sent (``result``: what ``send()`` returned)."""


__all__ = ["Handoff"]
