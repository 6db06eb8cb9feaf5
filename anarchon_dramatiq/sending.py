"""The job behind each marked actor: the slot winner sends one message.

[`register_actors()`][anarchon_dramatiq.sending.register_actors] turns every marked actor of a
broker into a core anarchon job on
one scheduler. The job's handler runs only in the instance that won the slot and calls
``actor.send_with_options(...)`` with the mark's arguments and options plus
``anarchon_job``, ``anarchon_slot`` and ``anarchon_attempt`` (SPEC §16).

Tracked jobs (``track=True``) leave the run open when the message is sent
(``ctx.detach(lease=queue_lease)``) and add ``anarchon_owner``: the worker's
[`AnarchonMiddleware`][anarchon_dramatiq.AnarchonMiddleware] then renews the lease while it executes
the message and records the real outcome. Until then the lease covers the time in the
queue, so with ``overlap="skip"`` the next slot is not sent while this one is queued or
running, and a message nobody finishes (worker killed) is re-sent by a backup scheduler
as the next attempt once the lease expires. Untracked jobs record ``success`` as soon as
the message is sent.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any, TypeAlias

import dramatiq
from dramatiq import Actor, Broker

from anarchon import AsyncScheduler, RunContext, Scheduler

from .marks import Mark, marks_of

logger = logging.getLogger("anarchon.dramatiq")

#: default time a tracked message may wait in the queue before it is re-sent
DEFAULT_QUEUE_LEASE = 600.0

AnyScheduler: TypeAlias = "Scheduler | AsyncScheduler"


class ActorSender:
    """The handler of one marked actor's job: sends one message per won slot."""

    def __init__(self, actor: Actor[Any, Any], mark: Mark, track: bool,
                 queue_lease: float) -> None:
        self.actor = actor
        self.mark = mark
        self.track = track
        self.queue_lease = queue_lease
        self.__name__ = f"send_{actor.actor_name}"

    def options_for(self, ctx: RunContext) -> dict[str, Any]:
        """The message options for this run (detaching it when tracked).

        Manual runs (``run_now``) are never tracked: they finish when the message is sent.
        """
        options: dict[str, Any] = dict(self.mark.message_options)
        if self.track and not ctx.manual:
            token = ctx.detach(lease=self.queue_lease)
            options.update(token.to_headers())
        else:
            options.update(anarchon_job=ctx.name, anarchon_slot=ctx.slot,
                           anarchon_attempt=ctx.attempt)
        return options

    def __call__(self, ctx: RunContext) -> None:
        options = self.options_for(ctx)
        args, kwargs = tuple(self.mark.args), dict(self.mark.kwargs)
        queue_name = self.mark.queue_name
        if queue_name is None or queue_name == self.actor.queue_name:
            message = self.actor.send_with_options(args=args, kwargs=kwargs,
                                                   delay=self.mark.delay, **options)
        else:
            broker = self.actor.broker
            if queue_name not in broker.get_declared_queues():
                broker.declare_queue(queue_name)
            built = self.actor.message_with_options(args=args, kwargs=kwargs, **options)
            message = broker.enqueue(built.copy(queue_name=queue_name), delay=self.mark.delay)
        logger.info("job %r slot %s attempt %d: sent message %s to %s", ctx.name, ctx.slot,
                    ctx.attempt, message.message_id, message.queue_name)


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
                    actors: Iterable[Actor[Any, Any]] | None = None) -> list[str]:
    """Register every marked actor as a job on ``scheduler``; returns the job names.

    ``broker`` defaults to Dramatiq's global broker (what ``django_dramatiq`` configures).
    ``actors`` limits registration to those actors. ``track`` is the default for marks
    that do not say ``track=``; ``queue_lease`` the default time a tracked message may
    wait in the queue (default 10 minutes). Job names default to actor names; a name
    already registered on the scheduler raises ``ValueError``.
    """
    from anarchon.durations import parse_duration

    default_lease = (DEFAULT_QUEUE_LEASE if queue_lease is None
                     else parse_duration(queue_lease, option="queue_lease"))
    chosen = None if actors is None else {id(a) for a in actors}
    names: list[str] = []
    for actor, mark in marked_actors(broker):
        if chosen is not None and id(actor) not in chosen:
            continue
        name = mark.name or actor.actor_name
        sender = ActorSender(actor, mark, track if mark.track is None else mark.track,
                             mark.queue_lease or default_lease)
        method = getattr(scheduler, mark.kind)
        method(name, mark.when, sender, **mark.job_options)
        names.append(name)
    return names
