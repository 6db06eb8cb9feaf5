"""anarchon_dramatiq: scheduled Dramatiq actors on every instance, one message per slot.

Mark actors with [`every()`][anarchon_dramatiq.every], [`cron()`][anarchon_dramatiq.cron] or
[`at()`][anarchon_dramatiq.at] (schedule first; the job is
named after the actor unless ``name=`` is given), run ``anarchon-dramatiq MODULE
--backend URL`` on every instance (or call [`register_actors()`][anarchon_dramatiq.register_actors]
on a scheduler you run yourself, e.g. from Django's ``manage.py anarchon run``), and add
[`AnarchonMiddleware`][anarchon_dramatiq.AnarchonMiddleware] to the workers' broker before
``Retries`` to record the real outcome of tracked messages (``track=True``). A tracked
slot is sent once unless its mark says ``resend=True``; outcomes that never arrive are
logged as a configuration error. Every actor is also offered as the handler
``dramatiq:<actor_name>`` for dynamic jobs (``add_job()``; ``params`` become the
message's arguments, see ``anarchon_dramatiq.params``).
"""

from __future__ import annotations

from .info import RunInfo, run_info
from .marks import Mark, at, cron, every, marks_of
from .middleware import AnarchonMiddleware, install_middleware
from .params import ParamsError, message_arguments
from .runner import build_scheduler
from .sending import ActorHandler, ActorSender, marked_actors, register_actors, register_handlers

__all__ = [
    "ActorHandler",
    "ActorSender",
    "AnarchonMiddleware",
    "Mark",
    "ParamsError",
    "RunInfo",
    "at",
    "build_scheduler",
    "cron",
    "every",
    "install_middleware",
    "marked_actors",
    "marks_of",
    "message_arguments",
    "register_actors",
    "register_handlers",
    "run_info",
]
