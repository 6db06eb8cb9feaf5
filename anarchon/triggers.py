"""Trigger requests for this instance's jobs: taken from the store and run here.

The same poll brings the store's control generation (``anarchon.controlling``): a
change to any job's control record is noticed within one poll interval.

``anarchon.engine.AsyncScheduler.trigger()`` stores a request from any process; the
instance with the job takes it (one of them: the store hands each request out once)
when the backend's wake-up channel announces it, else at the next poll.
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING

from .aio import wait_event

if TYPE_CHECKING:
    from .engine import AsyncScheduler

#: least interval of the trigger poll while the backend's wake-up channel is up (seconds)
SAFETY_POLL = 30.0


class TriggerInbox:
    """The trigger poll of one scheduler; ``wake`` makes it poll now."""

    def __init__(self, host: AsyncScheduler) -> None:
        self.host = host
        #: the backend's wake-up channel (Backend.watch) is up: requests arrive as
        #: messages and the poll slows to a safety net
        self.channel_up = False
        self.wake = asyncio.Event()

    def poll_interval(self) -> float:
        """Every heartbeat; while the wake-up channel is up, a request arrives as a
        message and the poll is only a safety net (a lost PUBLISH/NOTIFY): every
        ``max(lease, 30 s)``, so an idle instance sends ~nothing to the store."""
        if self.channel_up:
            return max(self.host.options.lease, SAFETY_POLL)
        return self.host.options.heartbeat

    async def run(self) -> None:
        """Take requests for our jobs and run them here: when woken, else every
        ``poll_interval()``."""
        host = self.host
        while True:
            await wait_event(self.wake, self.poll_interval())
            self.wake.clear()
            if host._stopping:
                return
            generation: int | None = None
            try:
                if host._controls.enabled:  # one round trip: triggers and the generation
                    poll = await host.backend.poll(list(host._jobs))
                    requests, generation = poll.triggers, poll.generation
                else:
                    requests = await host.backend.take_triggers(list(host._jobs))
            except Exception as exc:
                host._emit("error", None, error=exc)
                continue
            host._claiming.recovery.wake()  # the store answers: lost claims, now
            for request in requests:
                if request.name in host._jobs:
                    data = None if request.data is None else json.loads(request.data)
                    host._spawn(host.run_now(request.name, data), host._runs)
            if generation is not None:
                try:
                    await host._controls.seen(generation)
                    await host._controls.offer()
                except Exception as exc:
                    host._emit("error", None, error=exc)
