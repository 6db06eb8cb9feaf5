"""The optional capabilities of a store, one abstract class each.

A backend inherits [`Backend`][anarchon.backends.base.Backend] (through
[`LeaseBackend`][anarchon.backends.base.LeaseBackend] or
[`ClaimBackend`][anarchon.backends.base.ClaimBackend]) and, for each capability it has,
the class below: every method of a capability is abstract, so a backend that names a
capability but misses one of its methods cannot be instantiated (``TypeError`` naming
the methods), and ``isinstance(backend, ControlStore)`` is the one way the engine and
the framework layers ask whether a backend has it.

* [`TriggerStore`][anarchon.backends.capabilities.TriggerStore]: manual-run requests
  (``trigger()``) and ``forget()``.
* [`ControlStore`][anarchon.backends.capabilities.ControlStore]: runtime control
  (versioned control records, the version fence in claims, ``poll()`` with the
  generation, handler offers); a ``TriggerStore`` too.
* [`ValueStore`][anarchon.backends.capabilities.ValueStore]: small shared values with
  compare-and-set.
* [`SkipStore`][anarchon.backends.capabilities.SkipStore]: skip records in history.
* [`BatchStore`][anarchon.backends.capabilities.BatchStore]: ``claim_many()`` and
  ``finish_many()`` in one round trip per batch.
* [`LivenessStore`][anarchon.backends.capabilities.LivenessStore]: each instance's
  liveness record (``anarchon status``), written with the heartbeat.
* [`FormatStore`][anarchon.backends.capabilities.FormatStore]: the format version its
  namespace records, read without opening it (``anarchon doctor``).
* [`CountedHistory`][anarchon.backends.capabilities.CountedHistory]: a restriction, not a
  capability: history kept by count only (``history_ttl`` refused).

``as_triggers()``, ``as_control()``, ``as_values()`` and ``as_skips()`` give a backend
as the capability or raise the error a caller of a missing capability gets.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence

from .base import (
    Backend,
    ClaimRequest,
    ClaimResult,
    Finish,
    HeartbeatResult,
    HeldRun,
    Poll,
    RunKey,
)
from .control import ControlChange, ControlSnapshot
from .formats import StoredFormat
from .liveness import InstanceInfo, Instances
from .skips import Skip
from .trigger_rules import STALE_MANUAL_AFTER, TRIGGER_TTL, TriggerRequest


class TriggerStore(Backend):
    """Manual-run requests, by the rules of ``anarchon.backends.trigger_rules``."""

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

    @abstractmethod
    async def request_trigger(self, name: str, data: str | None, *,
                              exclusive: bool = False) -> str:
        """Store a request to run ``name`` once (any process); returns its id.

        With ``exclusive``, raise ``TriggerRefusedError`` instead while a request for
        ``name`` younger than ``trigger_ttl`` is pending or a manual attempt of ``name``
        started less than ``stale_manual_after`` ago is running, checked and stored in
        one atomic step."""

    @abstractmethod
    async def take_triggers(self, names: Sequence[str]) -> list[TriggerRequest]:
        """Atomically take (remove) the pending requests for these jobs: each request is
        taken by exactly one caller. Requests older than ``trigger_ttl`` are removed, not
        returned. Must cost one round trip when nothing is pending."""

    @abstractmethod
    async def forget(self, name: str) -> int:
        """Remove every record of job ``name`` (registration, runs, history, pending
        requests, shared values); how many. For a job no instance declares any more."""

    async def poll(self, names: Sequence[str]) -> Poll:
        """The triggers taken and generation 0 (a ``ControlStore`` answers both in one
        round trip)."""
        return Poll(await self.take_triggers(names), 0)


class ControlStore(TriggerStore):
    """Runtime control: the store's side is ``anarchon.backends.control``. The backend's
    claims also apply the version fence (``stale``). A control store takes trigger
    requests too: its ``poll()`` brings both."""

    @abstractmethod
    async def poll(self, names: Sequence[str]) -> Poll:
        """The trigger requests taken (as ``TriggerStore.take_triggers()``) and the control
        generation, in one round trip: this is every instance's idle traffic."""

    @abstractmethod
    async def read_controls(self) -> ControlSnapshot:
        """The generation, every job's control record and the live handler offers."""

    @abstractmethod
    async def change_control(self, change: ControlChange) -> int:
        """Atomically: if job ``change.name``'s stored version is
        ``change.expected_version``, store ``change.text`` as version
        ``expected_version + 1``, raise the generation, append ``change.entry`` to the
        job's change log (keeping the newest ``CHANGE_LOG_SIZE``) and announce
        ``Wakeup("changed", name)`` on the wake-up channel, if any. Returns the new
        version, or 0 (nothing written) when the stored version differs."""

    @abstractmethod
    async def change_log(self, name: str, count: int) -> list[str]:
        """Job ``name``'s newest ``count`` change-log entries (JSON), newest first."""

    @abstractmethod
    async def offer_handlers(self, instance_id: str, handlers: Sequence[str]) -> None:
        """Store (replace) the handler names instance ``instance_id`` offers, stamped
        with the store's time; no names: remove its offer."""


class ValueStore(Backend):
    """Small values shared by every instance, with compare-and-set."""

    @abstractmethod
    async def read_value(self, name: str, field: str) -> str | None:
        """The small value any instance stored under ``(name, field)``, or ``None``.

        Shared values let instances agree on state that is not a slot: e.g. the last run
        of a schedule that decides by itself when it is due (see
        [`swap_value()`][anarchon.backends.capabilities.ValueStore.swap_value]).
        """

    @abstractmethod
    async def swap_value(self, name: str, field: str, expected: str | None,
                         value: str) -> bool:
        """Compare-and-set: store ``value`` under ``(name, field)`` only if it holds
        ``expected`` now (``None``: nothing stored yet), atomically; True if stored.

        Of instances that read the same value and swap it, exactly one succeeds.
        """


class SkipStore(Backend):
    """Skip records in history (the rules: ``anarchon.backends.skips``); a backend
    without this keeps skips only as counts (``jobs()``) and log lines."""

    @abstractmethod
    async def record_skips(self, skips: Sequence[Skip]) -> None:
        """Write slots given up as ``late`` or ``overlap`` to history, at most one record
        per slot whichever instances ask, then bound each job's skip records as a finish
        bounds its attempts (apart from them). All are checked before any write."""


class BatchStore(Backend):
    """``claim_many()`` and ``finish_many()`` cost one round trip per batch: the engine
    then batches claims and finishes due together (otherwise it calls ``claim()`` and
    ``finish()`` per run). The requests of a batch are judged in list order."""

    @abstractmethod
    async def claim_many(self, requests: Sequence[ClaimRequest]
                         ) -> list[ClaimResult | Exception]:
        """One answer per request, in order, in one round trip (see
        [`Backend.claim_many()`][anarchon.backends.base.Backend.claim_many])."""

    @abstractmethod
    async def finish_many(self, finishes: Sequence[Finish]) -> list[bool | Exception]:
        """One answer per finish, in order, in one round trip (see
        [`Backend.finish_many()`][anarchon.backends.base.Backend.finish_many])."""


class LivenessStore(Backend):
    """Liveness records (the rules: ``anarchon.backends.liveness``): the lease keeper
    calls ``heartbeat_live()`` instead of ``heartbeat()`` at every beat, idle or not."""

    @abstractmethod
    async def heartbeat_live(self, owner: str, held: Sequence[HeldRun],
                             watched: Sequence[RunKey], lease_ms: int, info: InstanceInfo,
                             ttl_ms: int) -> HeartbeatResult:
        """``heartbeat(owner, held, watched, lease_ms)`` and, in the same round trip where
        the store allows it, store ``info`` as instance ``info.id``'s record stamped with
        the store's time (alive for ``ttl_ms``), deleting records expired for more than
        ``KEEP_DEAD_MS``."""

    @abstractmethod
    async def leave(self, instance_id: str) -> None:
        """Remove instance ``instance_id``'s record (it stops)."""

    @abstractmethod
    async def instances(self) -> Instances:
        """Every stored record, with the store's time."""


class FormatStore(Backend):
    """The format version its namespace records (``anarchon.backends.formats``)."""

    @abstractmethod
    async def stored_format(self) -> StoredFormat:
        """The recorded version and the one this code needs, read without creating or
        checking anything: the backend need not be open, and a namespace of another
        format (which ``open()`` refuses) is read too."""


class CountedHistory(Backend):
    """A backend that keeps history by count only (``history_size``): it refuses
    ``history_ttl``."""

    def refused_options(self) -> dict[str, str]:
        refused = super().refused_options()
        refused["history_ttl"] = (f"is not supported by backend {self.name}; it keeps "
                                  "history by count (history_size)")
        return refused


#: what ``forget()`` on a store without job records raises (``NotImplementedError``)
NO_FORGET = ("backend {name} cannot forget a job: it keeps no job records to remove "
             "(claim-only stores expire them by themselves)")
NO_TRIGGERS = "backend {name} does not support trigger()"
NO_CONTROL = ("backend {name} does not support runtime control (pause, reschedule, "
              "dynamic jobs); use a lease backend")


def as_triggers(backend: Backend, message: str = NO_TRIGGERS) -> TriggerStore:
    """``backend`` as a ``TriggerStore``, else ``NotImplementedError(message)`` (its
    ``{name}``: the backend's)."""
    if isinstance(backend, TriggerStore):
        return backend
    raise NotImplementedError(message.format(name=backend.name))


def as_control(backend: Backend, message: str = NO_CONTROL) -> ControlStore:
    """``backend`` as a ``ControlStore``, else ``TypeError(message)``."""
    if isinstance(backend, ControlStore):
        return backend
    raise TypeError(message.format(name=backend.name))


def as_values(backend: Backend) -> ValueStore:
    """``backend`` as a ``ValueStore``, else ``NotImplementedError``."""
    if isinstance(backend, ValueStore):
        return backend
    raise NotImplementedError(f"backend {backend.name} keeps no shared values")


def as_skips(backend: Backend) -> SkipStore:
    """``backend`` as a ``SkipStore``, else ``NotImplementedError``."""
    if isinstance(backend, SkipStore):
        return backend
    raise NotImplementedError(f"backend {backend.name} keeps no skip records")


__all__ = ["NO_CONTROL", "NO_FORGET", "NO_TRIGGERS", "BatchStore", "ControlStore",
           "CountedHistory", "FormatStore", "LivenessStore", "SkipStore", "TriggerStore",
           "ValueStore", "as_control", "as_skips", "as_triggers", "as_values"]
