"""The job behind each marked actor: the slot winner sends one message.

[`register_actors()`][anarchon_dramatiq.sending.register_actors] turns every marked actor of a
broker into a core anarchon job on
one scheduler. The job's handler runs only in the instance that won the slot and calls
``actor.send_with_options(...)`` with the mark's arguments and options plus
``anarchon_job``, ``anarchon_slot`` and ``anarchon_attempt`` (docs/contract.md,
*Framework surfaces*).

Tracked jobs (``track=True``) leave the run open when the message is sent
(``ctx.detach(lease=queue_lease)``) and add ``anarchon_owner``: the worker's
[`AnarchonMiddleware`][anarchon_dramatiq.AnarchonMiddleware] then renews the lease while it executes
the message and records the real outcome. Until then the lease covers the time in the
queue, so with ``overlap="skip"`` the next slot is not sent while this one is queued or
running, and a message nobody finishes (worker killed) is re-sent by a backup scheduler
as the next attempt once the lease expires — only with ``resend=True``: by default a
tracked slot is sent once (``max_attempts=1``), so a worker without the middleware, or a
slow queue, never makes the actor run twice; ``OutcomeWatch``
logs the missing outcome as a configuration error instead. Untracked jobs record
``success`` as soon as the message is sent.

Every actor of the broker, marked or not, is also offered as the handler
``dramatiq:<actor_name>`` of dynamic jobs (``add_job()``, the Django admin):
[`ActorHandler`][anarchon_dramatiq.sending.ActorHandler] is the same sender, with the
message's arguments taken from the job's ``params`` (``anarchon_dramatiq.params``).

A failed send is logged at ERROR with the broker's error and recorded as the run's
failure; skipped slots are logged (``SlotLog``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple, TypeAlias, TypeVar

import dramatiq
from dramatiq import Actor, Broker

from anarchon import AsyncScheduler, RunContext, Scheduler
from anarchon.backends.capabilities import ControlStore
from anarchon.durations import parse_duration
from anarchon.handoff.sender import Handoff

from . import outbox
from .errors import check_delay, check_resend
from .marks import Mark, check_message_options, marks_of
from .params import ParamsError, message_arguments
from .watch import OutcomeWatch, SlotLog

logger = logging.getLogger("anarchon.dramatiq")

#: default time a tracked message may wait in the queue before it is re-sent
DEFAULT_QUEUE_LEASE = 600.0
#: dynamic jobs name an actor's handler ``dramatiq:<actor_name>``
HANDLER_PREFIX = "dramatiq:"
#: what ``JobInfo.framework`` says of marked actors' jobs (``anarchon list``, admin)
FRAMEWORK = "dramatiq"

AnyScheduler: TypeAlias = "Scheduler | AsyncScheduler"
R = TypeVar("R")


class Message(NamedTuple):
    """One message of an actor: its arguments and its options (``anarchon_*`` included)."""

    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    options: dict[str, Any]


class ActorSender(Handoff[Message]):
    """The handler of one marked actor's job: sends one message per won slot (the core's
    hand-off, [`anarchon.handoff.sender.Handoff`][anarchon.handoff.sender.Handoff]: the lease
    check before each try, retries until ``max_late``, the outcome watch), each try
    through the process's send threads (``anarchon_dramatiq.outbox``)."""

    logger = logger
    verb = "sending"

    def __init__(self, actor: Actor[Any, Any], mark: Mark, track: bool,
                 queue_lease: float, watch: OutcomeWatch | None = None,
                 engine: AsyncScheduler | None = None, max_late: float | None = None) -> None:
        # a failed send is retried until the slot is max_late late (default: the
        # scheduler's; without a scheduler, not retried)
        super().__init__(track=track, queue_lease=queue_lease, engine=engine, watch=watch,
                         resend=mark.resend,
                         max_late=(max_late if max_late is not None else 0.0 if engine is None
                                   else float(engine.options.defaults["max_late"])))
        self.actor = actor
        self.mark = mark
        self.__name__ = f"send_{actor.actor_name}"

    def options_for(self, ctx: RunContext) -> dict[str, Any]:
        """The message options for this run (detaching it when tracked).

        Manual runs (``run_now``) are never tracked: they finish when the message is sent.
        """
        return self.options(ctx, self.headers(ctx))

    def options(self, ctx: RunContext, headers: dict[str, Any]) -> dict[str, Any]:
        """The mark's message options, then ``headers`` and what the worker reads."""
        options: dict[str, Any] = dict(self.mark.message_options)
        options.update(headers)
        if self.tracked(ctx):
            # the worker's middleware trims history as the mark asks
            size, ttl = self.mark.job_options.get("history_size"), self.mark.job_options.get(
                "history_ttl")
            if size is not None:
                options["anarchon_history_size"] = size
            if ttl is not None:
                options["anarchon_history_ttl"] = parse_duration(ttl, option="history_ttl")
        if ctx.data is not None:  # the mark's data=, run_now(data=): read with run_info()
            options["anarchon_data"] = ctx.data
        return options

    def arguments(self, ctx: RunContext) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """The actor's arguments for this run: the mark's ``args``/``kwargs``."""
        return tuple(self.mark.args), dict(self.mark.kwargs)

    def message(self, ctx: RunContext, headers: dict[str, Any]) -> Message:
        try:
            args, kwargs = self.arguments(ctx)
        except ParamsError as exc:
            logger.error("job %r slot %s attempt %d: %s; the run is recorded as failed",
                         ctx.name, ctx.slot, ctx.attempt, exc)
            raise
        return Message(args, kwargs, self.options(ctx, headers))

    def through(self, attempt: Callable[[], R]) -> R:
        """Each try through the outbox: its few threads hold the broker connections."""
        return outbox.send(attempt)

    def send(self, ctx: RunContext, message: Message) -> Any:
        queue_name = self.mark.queue_name
        if queue_name is None or queue_name == self.actor.queue_name:
            return self.actor.send_with_options(args=message.args, kwargs=message.kwargs,
                                                delay=self.mark.delay, **message.options)
        broker = self.actor.broker
        if queue_name not in broker.get_declared_queues():
            broker.declare_queue(queue_name)
        built = self.actor.message_with_options(args=message.args, kwargs=message.kwargs,
                                                **message.options)
        return broker.enqueue(built.copy(queue_name=queue_name), delay=self.mark.delay)

    def failed(self, ctx: RunContext, exc: Exception) -> None:
        logger.error("job %r slot %s attempt %d: sending to queue %r failed: %s: %s; "
                     "the run is recorded as failed", ctx.name, ctx.slot, ctx.attempt,
                     self.mark.queue_name or self.actor.queue_name, type(exc).__name__, exc)

    def sent(self, ctx: RunContext, result: Any) -> None:
        logger.info("job %r slot %s attempt %d: sent message %s to %s", ctx.name, ctx.slot,
                    ctx.attempt, result.message_id, result.queue_name)


class ActorHandler(ActorSender):
    """The handler ``dramatiq:<actor_name>`` of dynamic jobs: the same sender as a marked
    actor's (one message per won slot, the same ``anarchon_*`` options), untracked, its
    arguments taken from the job's ``params`` (``anarchon_dramatiq.params``)."""

    def __init__(self, actor: Actor[Any, Any], engine: AsyncScheduler | None = None) -> None:
        super().__init__(actor, Mark("handler", None, None), track=False,
                         queue_lease=DEFAULT_QUEUE_LEASE, engine=engine)

    def arguments(self, ctx: RunContext) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """The arguments ``ctx.params`` stands for; ``ParamsError`` when it cannot."""
        return message_arguments(ctx.params, ctx.name, self.actor.actor_name)


def handler_name(actor: Actor[Any, Any]) -> str:
    """The handler name a dynamic job gives to send ``actor``: ``dramatiq:<actor_name>``."""
    return HANDLER_PREFIX + actor.actor_name


def marked_actors(broker: Broker | None = None) -> list[tuple[Actor[Any, Any], Mark]]:
    """``(actor, mark)`` for every marked actor declared on ``broker`` (default: the
    global broker), sorted by actor name."""
    broker = broker if broker is not None else dramatiq.get_broker()
    found = []
    for actor_name in sorted(broker.get_declared_actors()):
        actor = broker.get_actor(actor_name)
        found += [(actor, mark) for mark in marks_of(actor)]
    return found


def register_actors(scheduler: AnyScheduler, broker: Broker | None = None, *,
                    track: bool = False, queue_lease: Any = None,
                    actors: Iterable[Actor[Any, Any]] | None = None,
                    handlers: bool = True) -> list[str]:
    """Register every marked actor as a job on ``scheduler``; returns the job names.

    ``broker`` defaults to Dramatiq's global broker (what ``django_dramatiq`` configures).
    ``actors`` limits registration to those actors. ``track`` is the default for marks
    that do not say ``track=``; ``queue_lease`` the default time a tracked message may
    wait in the queue (default 10 minutes). Job names default to actor names; a name
    already registered on the scheduler raises ``ValueError``.

    Tracked marks get ``max_attempts=1`` unless they say ``resend=True``; ``cron`` marks
    without ``timezone=`` are pinned to UTC, whatever the scheduler's default zone (the
    same slots under every entry point). Marks sending to a ``queue_name`` that no actor
    of the broker declares are logged at WARNING (workers consume declared queues only).

    With ``handlers`` (the default), every actor of the broker (marked or not; limited to
    ``actors`` when given) is also offered for dynamic jobs, by
    [`register_handlers()`][anarchon_dramatiq.sending.register_handlers].
    """
    default_lease = (DEFAULT_QUEUE_LEASE if queue_lease is None
                     else parse_duration(queue_lease, option="queue_lease"))
    actors = None if actors is None else list(actors)
    chosen = None if actors is None else {id(a) for a in actors}
    core = scheduler.core if isinstance(scheduler, Scheduler) else scheduler
    watch = OutcomeWatch(core)
    found = [(a, m) for a, m in marked_actors(broker)
             if chosen is None or id(a) in chosen]
    queues = {a.queue_name for a in all_actors(broker)}
    names: list[str] = []
    for actor, mark in found:
        name = mark.name or actor.actor_name
        where = f"job {name!r} (actor {actor.actor_name!r})"
        check_message_options(mark, actor.broker.actor_options, actor.actor_name)
        tracked = track if mark.track is None else mark.track
        lease = mark.queue_lease or default_lease
        options = dict(mark.job_options)
        if tracked:
            check_resend(where, mark.resend, options.get("max_attempts"))
            check_delay(where, mark.delay, lease)
            if not mark.resend:
                options["max_attempts"] = 1
        if mark.kind == "cron":
            options.setdefault("timezone", "UTC")
        if mark.queue_name is not None and mark.queue_name not in queues:
            logger.warning(
                "%s sends to queue %r, which no actor of the loaded modules declares "
                "(declared: %s): Dramatiq workers consume only the queues of their actors, "
                "so unless workers elsewhere declare it the message is never processed%s",
                where, mark.queue_name, ", ".join(sorted(queues)),
                " and the tracked run blocks the job for queue_lease" if tracked else "")
        max_late = options.get("max_late")
        sender = ActorSender(actor, mark, tracked, lease, watch, core,
                             None if max_late is None else
                             parse_duration(max_late, option=f"{where}: max_late"))
        scheduler.declare_job(mark.kind, name, mark.when, sender, options,
                              framework=FRAMEWORK)
        names.append(name)
    if names:
        core.on("skip", SlotLog(set(names)))
    if handlers:
        register_handlers(scheduler, broker, actors=actors)
    return names


def register_handlers(scheduler: AnyScheduler, broker: Broker | None = None, *,
                      actors: Iterable[Actor[Any, Any]] | None = None) -> list[str]:
    """Offer every actor of ``broker`` (default: the global broker; limited to ``actors``)
    as the handler ``dramatiq:<actor_name>`` of dynamic jobs on ``scheduler``; returns the
    handler names (none on a store without runtime control).

    ``add_job(name, handler="dramatiq:report", every="1h", params={"kind": "daily"})``
    then sends ``report`` one message per slot (``params`` → arguments:
    ``anarchon_dramatiq.params``), untracked: the run succeeds when the message is sent.
    """
    core = scheduler.core if isinstance(scheduler, Scheduler) else scheduler
    if not isinstance(core.backend, ControlStore):
        return []
    chosen = None if actors is None else {id(a) for a in actors}
    offered: list[str] = []
    for actor in sorted(all_actors(broker), key=lambda a: a.actor_name):
        if chosen is None or id(actor) in chosen:
            offered.append(handler_name(actor))
            core.handler(offered[-1], ActorHandler(actor, core))
    return offered


def all_actors(broker: Broker | None) -> list[Actor[Any, Any]]:
    """Every actor declared on ``broker`` (default: the global broker)."""
    broker = broker if broker is not None else dramatiq.get_broker()
    return [broker.get_actor(name) for name in broker.get_declared_actors()]
