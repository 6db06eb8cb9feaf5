"""Trigger requests for this instance's jobs: taken from the store and run here.

The same poll brings the store's control generation (``anarchon.control.controls``): a
change to any job's control record is noticed within one poll interval.

``anarchon.engine.scheduler.AsyncScheduler.trigger()`` stores a request from any process; the
instance with the job takes it (one of them: the store hands each request out once)
when the backend's wake-up channel announces it, else at the next poll.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Coroutine
from typing import Any

from ..backends.capabilities import as_triggers
from ..engine.aio import wait_event
from ..engine.runtime import Runtime
from .controls import Controls

#: runs a job here and now: ``run_now(name, data)``
RunNow = Callable[[str, Any], Coroutine[Any, Any, object]]

#: least interval of the trigger poll while the backend's wake-up channel is up (seconds)
SAFETY_POLL = 30.0


class TriggerInbox:
    """The trigger poll of one scheduler; ``wake`` makes it poll now."""

    def __init__(self, runtime: Runtime, controls: Controls, store_answered: Callable[[], None],
                 run_now: RunNow) -> None:
        self.runtime = runtime
        self.controls = controls
        #: told when the store answers a poll (claims whose answer was lost retry now)
        self.store_answered = store_answered
        self.run_now = run_now
        #: the backend's wake-up channel (Backend.watch) is up: requests arrive as
        #: messages and the poll slows to a safety net
        self.channel_up = False
        self.wake = asyncio.Event()

    def poll_interval(self) -> float:
        """Every heartbeat; while the wake-up channel is up, a request arrives as a
        message and the poll is only a safety net (a lost PUBLISH/NOTIFY): every
        ``max(lease, 30 s)``, so an idle instance sends ~nothing to the store."""
        if self.channel_up:
            return max(self.runtime.options.lease, SAFETY_POLL)
        return self.runtime.options.heartbeat

    async def run(self) -> None:
        """Take requests for our jobs and run them here: when woken, else every
        ``poll_interval()``."""
        runtime, controls = self.runtime, self.controls
        while True:
            await wait_event(self.wake, self.poll_interval())
            self.wake.clear()
            if runtime.tasks.stopping:
                return
            generation: int | None = None
            try:
                if controls.enabled:  # one round trip: triggers and the generation
                    poll = await runtime.backend.poll(list(runtime.jobs))
                    requests, generation = poll.triggers, poll.generation
                else:
                    requests = await as_triggers(runtime.backend).take_triggers(
                        list(runtime.jobs))
            except Exception as exc:
                runtime.emit("error", None, error=exc)
                continue
            self.store_answered()  # lost claims, now
            for request in requests:
                if request.name in runtime.jobs:
                    data = None if request.data is None else json.loads(request.data)
                    runtime.tasks.run(self.run_now(request.name, data))
            if generation is not None:
                try:
                    await controls.seen(generation)
                    await controls.offer()
                except Exception as exc:
                    runtime.emit("error", None, error=exc)
