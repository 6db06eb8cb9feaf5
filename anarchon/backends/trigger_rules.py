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

from dataclasses import dataclass
from typing import Literal

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
