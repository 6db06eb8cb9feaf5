"""Building the one scheduler that sends marked actors' messages."""

from __future__ import annotations

from typing import Any

from dramatiq import Broker

from anarchon import Backend, Scheduler, from_url
from anarchon.backends.capabilities import ControlStore

from .sending import all_actors, register_actors


def build_scheduler(backend: str | Backend, broker: Broker | None = None, *,
                    track: bool = False, queue_lease: Any = None,
                    instance_id: str | None = None, **options: Any) -> Scheduler:
    """A core [`anarchon.Scheduler`][anarchon.Scheduler] with every marked actor of ``broker``
    registered.

    ``backend`` is a URL for [`anarchon.from_url()`][anarchon.from_url] or a backend object;
    ``options`` are scheduler options (``lease``, ``heartbeat``, ``jitter``, ``max_late`` …).
    Every actor of ``broker`` is offered as the handler ``dramatiq:<actor_name>`` for
    dynamic jobs. Raises ``ValueError`` when there is nothing to schedule: no actor is
    marked and (the store has no runtime control, or the broker declares no actor). Call
    ``run()`` (blocks, stops gracefully on SIGINT/SIGTERM) or ``start()``/``stop()`` on
    the result.
    """
    store = from_url(backend) if isinstance(backend, str) else backend
    scheduler = Scheduler(store, instance_id=instance_id, **options)
    names = register_actors(scheduler, broker, track=track, queue_lease=queue_lease)
    if not names and not (isinstance(store, ControlStore) and all_actors(broker)):
        raise ValueError("no Dramatiq actor is marked with anarchon_dramatiq.every/cron/at"
                         + (" and none is declared to run dynamic jobs" if
                            isinstance(store, ControlStore) else "")
                         + " (import the modules that declare them first)")
    return scheduler
