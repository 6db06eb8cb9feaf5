"""What reaches a scheduler from other instances: trigger requests, hand-overs, changes.

Two tasks carry them: the trigger inbox (``anarchon.control.trigger_inbox``: requests
and the control generation, polled) and the backend's wake-up channel
([`Backend.watch()`][anarchon.backends.base.Backend.watch]: a message per request,
hand-over and change, so that the poll slows to a safety net while it is up). Both start
once the scheduler has something to hear about (a job, or a handler for dynamic jobs),
at ``start()`` or when the first one is added later: a scheduler that only triggers,
queries or controls sends no poll. Idle cost grows with running jobs, not registered ones.
"""

from __future__ import annotations

from collections.abc import Callable

from ..backends.base import RunKey, RunState, Wakeup
from ..backends.capabilities import TriggerStore
from ..control.controls import Controls
from ..control.trigger_inbox import TriggerInbox
from .claims import Claims
from .lease_keeper import LeaseKeeper
from .runtime import Runtime


class WakeChannel:
    """The trigger inbox and the wake-up watch of one scheduler, and what each wake-up
    does (``woken()``)."""

    def __init__(self, runtime: Runtime, controls: Controls, inbox: TriggerInbox,
                 claims: Claims, keeper: Callable[[], LeaseKeeper | None]) -> None:
        self.runtime = runtime
        #: the control records (a ``changed`` wake-up reads them again)
        self.controls = controls
        #: the trigger poll (a ``trigger`` wake-up makes it poll now)
        self.inbox = inbox
        #: takes over a run whose owner handed it over (a ``released`` wake-up)
        self.claims = claims
        #: the lease keeper once started (``None``: before, or on a claim-only store)
        self.keeper = keeper
        #: the inbox and the watch were started
        self.listening = False

    @property
    def up(self) -> bool:
        """The backend's wake-up channel is connected."""
        return self.inbox.channel_up

    def listen(self) -> None:
        """Start the trigger inbox and the wake-up watch if the scheduler runs, has a job
        or a handler, and they have not started yet (on the scheduler's loop)."""
        runtime = self.runtime
        if self.listening or not runtime.running:
            return
        if not runtime.jobs and not self.controls.handlers:
            return
        self.listening = True
        backend = runtime.backend
        if isinstance(backend, TriggerStore):
            runtime.spawn(self.inbox.run())
        if self.keeper() is not None or isinstance(backend, TriggerStore):
            runtime.spawn(backend.watch(self.woken))

    def woken(self, wakeup: Wakeup) -> None:
        """One message from the backend's wake-up channel."""
        runtime, keeper = self.runtime, self.keeper()
        if wakeup.kind == "released":
            # a backup of that run claims it now instead of at its next heartbeat (the
            # store still decides: the claim is fenced on the released attempt)
            key = RunKey(wakeup.name, wakeup.slot)
            if keeper is not None and runtime.running and keeper.unwatch(key):
                self.claims.expired(RunState(wakeup.name, wakeup.slot, "", wakeup.attempt,
                                             running=True, lease_expired=True,
                                             handed_over=True))
        elif wakeup.kind == "trigger":
            if wakeup.name in runtime.jobs:
                self.inbox.wake.set()
        elif wakeup.kind == "changed":
            if runtime.running and self.controls.enabled:
                runtime.spawn(self._refresh_controls())
        else:  # "up" (maybe after messages were missed) or "down": poll once now
            self.inbox.channel_up = wakeup.kind == "up"
            self.inbox.wake.set()
            if self.inbox.channel_up and keeper is not None:
                keeper.poke()

    async def _refresh_controls(self) -> None:
        try:
            await self.controls.refresh()
        except Exception as exc:
            self.runtime.emit("error", None, error=exc)


__all__ = ["WakeChannel"]
