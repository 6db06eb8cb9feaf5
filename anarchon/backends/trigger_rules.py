"""The trigger contract: manual-run requests (``Scheduler.trigger()``, the Django admin's
Run now), with the same rules on every store that supports them.

* **One manual run at a time per job.** ``request_trigger(..., exclusive=True)`` refuses
  (:class:`~anarchon.errors.TriggerRefusedError`) while a live request for the job is
  pending or a manual attempt of it is running (started less than the backend's
  ``stale_manual_after`` ago: a manual run holds no lease, so one whose instance was
  killed stays ``running`` in history and must not block the job for ever); the check
  and the insert are one atomic step of the store, so two requesters racing never
  store two pending requests. The engine asks for exclusivity unless the job is
  declared, in the requesting process, with ``overlap="allow"``.
* **Requests expire.** A request no instance took within the backend's
  ``trigger_ttl`` (default ``max(lease, 60 s)``, set by the first scheduler using the
  backend) is dropped by the next take instead of being run, and no longer blocks a new
  request.
* **Forgetting.** ``forget(name)`` removes a job's records (lease stores; claim-only
  stores refuse). A job no instance registered or started for ``GONE_AFTER_MS`` is
  *gone* (``is_gone``): the Django admin offers no Run now for it and refuses requests.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, Literal

from ..errors import TriggerRefusedError

#: the least life of a manual-run request (seconds); the default is ``max(lease, this)``
TRIGGER_TTL = 60.0

#: how long a manual attempt marked ``running`` blocks new requests (seconds): after
#: that, its instance most likely died before recording the outcome (manual runs hold
#: no lease to tell), and a new request is accepted
STALE_MANUAL_AFTER = 3600.0

#: a job no instance has registered or started for this long is *gone* (ms): the Django
#: admin shows it without Run now and refuses requests for it (``forget()`` removes it)
GONE_AFTER_MS = 24 * 3600 * 1000

#: why ``request_trigger(exclusive=True)`` refused: a live request of the job is pending,
#: or a manual attempt of it is running
Refusal = Literal["pending", "running"]

#: what each refusal means, as the refusal's message says it
REASONS: dict[str, str] = {
    "pending": "a manual run of it was requested and no instance has taken it yet",
    "running": "a manual run of it is running",
}


def trigger_ttl_for(lease: float) -> float:
    """The default life of a manual-run request: ``max(lease, 60 s)``."""
    return max(lease, TRIGGER_TTL)


def is_gone(last_seen_ms: int | None, now_ms: int) -> bool:
    """Whether a job last registered or started at ``last_seen_ms`` (``None``: never) is
    gone at store time ``now_ms`` (see ``GONE_AFTER_MS``)."""
    return last_seen_ms is None or last_seen_ms < now_ms - GONE_AFTER_MS


def refused(name: str, reason: Refusal) -> TriggerRefusedError:
    """The error ``request_trigger()`` raises when it refuses a request for ``name``."""
    return TriggerRefusedError(f"job “{name}” was not requested again: {REASONS[reason]}",
                               name=name, reason=reason)


@dataclass(frozen=True)
class TriggerRequest:
    """A manual run requested through the store (``trigger()``); ``data`` is JSON text."""

    id: str
    name: str
    data: str | None


class TriggerDefaults:
    """The trigger part of the backend contract (mixed into ``Backend``)."""

    name: str
    #: whether ``trigger()`` requests can be stored
    supports_triggers: ClassVar[bool] = False
    #: how long a request waits for an instance before it is dropped unrun (seconds);
    #: ``None``: the first scheduler built on the backend sets ``max(lease, 60 s)``
    trigger_ttl: float | None = None
    #: how long a running manual attempt blocks an exclusive request (seconds)
    stale_manual_after: float = STALE_MANUAL_AFTER

    def stale_manual_ms(self) -> int:
        """``stale_manual_after`` in milliseconds."""
        return int(self.stale_manual_after * 1000)

    def trigger_ttl_ms(self) -> int:
        """``trigger_ttl`` in milliseconds (60 s while it is unset)."""
        return int((TRIGGER_TTL if self.trigger_ttl is None else self.trigger_ttl) * 1000)

    async def request_trigger(self, name: str, data: str | None, *,
                              exclusive: bool = False) -> str:
        """Store a request to run ``name`` once (any process); returns its id.

        With ``exclusive``, raise ``TriggerRefusedError`` instead while a request for
        ``name`` younger than ``trigger_ttl`` is pending or a manual attempt of ``name``
        started less than ``stale_manual_after`` ago is running, checked and stored in
        one atomic step."""
        raise NotImplementedError(f"backend {self.name} does not support trigger()")

    async def take_triggers(self, names: Sequence[str]) -> list[TriggerRequest]:
        """Atomically take (remove) the pending requests for these jobs: each request is
        taken by exactly one caller. Requests older than ``trigger_ttl`` are removed, not
        returned. Must cost one round trip when nothing is pending."""
        return []

    async def forget(self, name: str) -> int:
        """Remove every record of job ``name`` (registration, runs, history, pending
        requests, shared values); how many. For a job no instance declares any more."""
        raise NotImplementedError(
            f"backend {self.name} cannot forget a job: it keeps no job records to remove "
            "(claim-only stores expire them by themselves)")
