"""The contract between the engine and a store.

The engine decides *when* to ask; a backend decides *who wins*, atomically, with the
store's own clock. There are two kinds:

* [`LeaseBackend`][anarchon.backends.base.LeaseBackend] (Redis/Valkey lease, PostgreSQL,
  SQLite): holds a lease per run, so a backup can take over an idle runner, overlapping
  runs can be refused, and crashed runs are retried.
* [`ClaimBackend`][anarchon.backends.base.ClaimBackend] (RabbitMQ, NATS; the lab's Redis comparison
  strategies): only picks one winner per slot and keeps history.

Every method is a coroutine; a backend whose driver is blocking runs it in its own thread.
Backends never do I/O in ``__init__``: [`Backend.open()`][anarchon.backends.base.Backend.open]
connects. Store errors are raised as [`StoreError`][anarchon.errors.StoreError] (or a
subclass).

Fencing: every write made on behalf of a running attempt (renew, release, note, finish) is
conditional on ``(owner, attempt)``; a stale runner's write must change nothing.

The whole contract (slots, claims, leases, fencing, hand-over, catch-up, history, and
what each backend must do) is ``docs/contract.md`` (the docs site's *The contract*).
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from ..engine.aio import gathered
from ..history import RunRecord, RunStatus
from .trigger_rules import TriggerRequest as TriggerRequest

ClaimReason = Literal["scheduled", "catch-up", "takeover"]
ClaimOutcome = Literal[
    "won",        # this instance runs the attempt
    "taken",      # another instance holds (or held) this slot
    "late",       # the store's clock says slot + max_late has passed
    "early",      # the store's clock says the slot is more than EARLY_TOLERANCE_MS away
    "overlap",    # overlap="skip" and an earlier run of the job still holds a lease
    "exhausted",  # takeover refused: max_attempts reached; the run is marked interrupted
    "stale",      # planned from an older control record than the store's (nothing written)
]


#: how far before its slot (by the store's clock) a scheduled or catch-up claim may come:
#: earlier ones are refused as ``early`` and write nothing, so an instance whose clock
#: runs ahead cannot start a slot before it is due
EARLY_TOLERANCE_MS = 250


@dataclass(frozen=True)
class JobSpec:
    """A registered job, told to the store at ``open()`` and again every
    ``anarchon.control.registration_refresh.REGISTER_EVERY`` (``anarchon.backends.frameworks``).

    ``registered_ms``: in ``known_jobs()`` answers, when an instance last registered the
    job (store clock, epoch ms); ``None`` where the store does not keep it. Ignored by
    ``register()`` and by comparisons.
    """

    name: str
    kind: str
    schedule: str
    framework: str | None = None
    registered_ms: int | None = field(default=None, compare=False)


@dataclass(frozen=True)
class RunKey:
    """Identity of one scheduled run."""

    name: str
    slot: int


@dataclass(frozen=True)
class HeldRun:
    """A run this instance is executing: the fencing token is ``(slot, attempt)``."""

    name: str
    slot: int
    attempt: int

    @property
    def key(self) -> RunKey:
        return RunKey(self.name, self.slot)


@dataclass(frozen=True)
class ClaimRequest:
    """Ask the store for the right to run one attempt of a slot.

    The store must, atomically and by its own clock:

    * ``reason="scheduled"`` or ``"catch-up"``: first refuse as ``early``, writing
      nothing, if ``slot - now > EARLY_TOLERANCE_MS`` (the caller may claim again then).
    * ``reason="scheduled"``: refuse as ``late`` if ``now > slot + max_late_ms``; mark
      earlier runs of the job whose lease expired ``interrupted``; refuse as ``overlap``
      when ``overlap == "skip"`` and an earlier run still holds a valid lease (recording
      the slot as skipped, so it never runs later); refuse as ``taken`` if the slot has a
      run already; otherwise record attempt 1 owned by ``owner`` until ``now + lease_ms``.
    * ``reason="catch-up"``: like scheduled, but instead of ``max_late`` require
      ``slot > now - catch_up_ms`` and that the job was known to the store before ``slot``
      (else ``late``); with ``one_off`` (an ``at()`` job, whose slot is its only run) the
      job need only be known to the store, at any time.
    * ``reason="scheduled"`` or ``"catch-up"``: before anything else but ``early``,
      refuse as ``stale``, writing nothing, when the job's stored control version
      (``anarchon.backends.control``; 0 when it has no record) is higher than
      ``version``, the version the claim was planned from.
    * ``reason="takeover"``: win only if the run is still running at ``expected_attempt``
      with an expired lease (a store that can tell when it started treats no lease as
      expired before it has been up for ``lease_ms``). If the attempt was handed over it
      does not count towards ``max_attempts``; otherwise, when ``max_attempts`` counted
      attempts have started, mark the run interrupted and answer ``exhausted``. The
      expired attempt's record becomes ``interrupted``.
    """

    name: str
    slot: int
    owner: str
    reason: ClaimReason
    lease_ms: int
    max_late_ms: int
    max_attempts: int
    overlap: Literal["skip", "allow"]
    catch_up_ms: int = 0
    expected_attempt: int = 0
    #: the job's control version this claim was planned from (the version fence)
    version: int = 0
    #: a catch-up of a one-off (``at()``) job: it need not be known before its slot
    one_off: bool = False


@dataclass(frozen=True)
class ClaimResult:
    """The store's answer: ``outcome``, the attempt won (0 if not won), the store time."""

    outcome: ClaimOutcome
    attempt: int
    store_ms: int


@dataclass(frozen=True)
class RunState:
    """A run as the store sees it now (for backups watching it, and start-up recovery)."""

    name: str
    slot: int
    owner: str
    attempt: int
    running: bool
    lease_expired: bool
    handed_over: bool


@dataclass(frozen=True)
class HeartbeatResult:
    """``lost``: held runs whose lease this instance no longer owns; ``watched``: states;
    ``gone``: the runs of ``lost`` whose record does not exist at all (a failover to a
    replica that was behind, a flush, a restore), as opposed to one another owner holds
    or that ended."""

    lost: frozenset[RunKey]
    watched: Sequence[RunState]
    gone: frozenset[RunKey] = frozenset()


@dataclass(frozen=True)
class Finish:
    """Record the end of an attempt; ignored unless ``(owner, attempt)`` still holds it."""

    name: str
    slot: int
    owner: str
    attempt: int
    status: RunStatus
    error: str | None
    history_size: int
    history_ttl_ms: int | None
    retain_runs_ms: int


WakeupKind = Literal[
    "up",        # the channel is (re)connected: poll once, messages may have been missed
    "down",      # the channel is lost: poll every heartbeat until it is "up" again
    "released",  # a run was handed over (``name``, ``slot``, ``attempt`` released)
    "trigger",   # a trigger() request was stored for job ``name``
    "changed",   # job ``name``'s control record changed (pause, reschedule, add …)
]


@dataclass(frozen=True)
class Wakeup:
    """A notification from the store's channel (see
    [`Backend.watch()`][anarchon.backends.base.Backend.watch])."""

    kind: WakeupKind
    name: str = ""
    slot: int = 0
    attempt: int = 0


@dataclass(frozen=True)
class Poll:
    """What an instance's periodic poll brings: the trigger requests it took and the
    namespace's control generation (see ``anarchon.backends.control``)."""

    triggers: list[TriggerRequest]
    generation: int


#: options a backend without leases cannot honour
LEASE_ONLY_OPTIONS = ("lease", "heartbeat", "overlap", "max_attempts", "catch_up")


class Backend(ABC):
    """What every backend provides: connect, claim, finish, history. The optional
    capabilities (triggers, runtime control, shared values, skip records, batches) are
    the abstract classes of ``anarchon.backends.capabilities``; leases are
    [`LeaseBackend`][anarchon.backends.base.LeaseBackend]."""

    #: ``"sqlite"``, ``"redis:lease"``, ``"postgres"`` …
    name: str

    def refused_options(self) -> dict[str, str]:
        """The scheduler and job options this backend refuses, each with why (the end of
        the error message). ``anarchon.jobs.definition.resolve_job()`` and
        ``anarchon.jobs.definition.resolve_scheduler_options()`` check every option against this,
        for every layer (the core, Django, Celery, Dramatiq), as Dramatiq middleware
        declares the actor options it takes. A backend without leases refuses the
        lease options; a backend refusing more extends it."""
        refused: dict[str, str] = {}
        if not isinstance(self, LeaseBackend):
            refused.update({option: f"needs a lease backend; backend {self.name} only picks "
                            "one winner per slot" for option in LEASE_ONLY_OPTIONS})
        return refused

    async def open(self) -> None:
        """Connect, check the server, create tables or scripts. Called by ``start()`` and
        on demand by queries; must be safe to call again once open."""

    async def close(self) -> None:
        """Close what this backend opened; never a client the user passed in. Safe to call
        twice; a later ``open()`` may reconnect."""

    def check_job(self, name: str, jitter: float, max_late: float) -> None:
        """Refuse, with ``ValueError``, a job this backend cannot serve (checked on add)."""

    @abstractmethod
    async def register(self, jobs: Sequence[JobSpec]) -> None:
        """Tell the store these jobs exist (keeps the first-seen time for catch-up)."""

    @abstractmethod
    async def claim(self, request: ClaimRequest) -> ClaimResult:
        """Try to win one attempt of a slot. See
        [`ClaimRequest`][anarchon.backends.base.ClaimRequest] for the rules."""

    async def claim_many(self, requests: Sequence[ClaimRequest]
                         ) -> list[ClaimResult | Exception]:
        """Try to win several attempts at once; one answer per request, in order.

        Each request is judged exactly as [`claim()`][anarchon.backends.base.Backend.claim] would
        judge it (the rules of
        [`ClaimRequest`][anarchon.backends.base.ClaimRequest]). An answer is the
        [`ClaimResult`][anarchon.backends.base.ClaimResult] or the exception
        that claim raised (its outcome is then unknown: see
        [`confirm()`][anarchon.backends.base.Backend.confirm]). A backend
        that can do this in one round trip is a
        [`BatchStore`][anarchon.backends.capabilities.BatchStore] and judges
        the requests in list order; this default makes one
        [`claim()`][anarchon.backends.base.Backend.claim] call per
        request, concurrently (two requests for one run: either may be the winner).
        """
        answers = await asyncio.gather(*(self.claim(r) for r in requests),
                                       return_exceptions=True)
        return [gathered(a) for a in answers]

    async def finish_many(self, finishes: Sequence[Finish]) -> list[bool | Exception]:
        """Record several outcomes at once; one answer per finish, in order.

        Each answer is what [`finish()`][anarchon.backends.base.Backend.finish] would return (False
        when stale) or the exception
        it raised. This default makes one [`finish()`][anarchon.backends.base.Backend.finish] call
        per item, concurrently.
        """
        answers = await asyncio.gather(*(self.finish(f) for f in finishes),
                                       return_exceptions=True)
        return [gathered(a) for a in answers]

    async def confirm(self, request: ClaimRequest) -> int:
        """After an ambiguous claim (reply lost), the attempt this owner holds, else 0.

        The default answers 0: an instance never runs a slot it has not confirmed winning.
        """
        return 0

    @abstractmethod
    async def finish(self, finish: Finish) -> bool:
        """Record an attempt's outcome, fenced by ``(owner, attempt)``. False if stale."""

    @abstractmethod
    async def start_manual(self, name: str, owner: str, started_ms: int) -> str:
        """Record a manual run as running; returns a token for
        [`finish_manual()`][anarchon.backends.base.Backend.finish_manual]."""

    @abstractmethod
    async def finish_manual(self, token: str, status: RunStatus, error: str | None,
                            history_size: int, history_ttl_ms: int | None) -> None:
        """Record a manual run's outcome."""

    @abstractmethod
    async def history(self, name: str, count: int) -> list[RunRecord]:
        """Newest-first attempts of a job from all instances (works without jobs)."""

    @abstractmethod
    async def known_jobs(self) -> list[JobSpec]:
        """Jobs registered by any instance (for ``jobs()`` in a process without jobs)."""

    async def poll(self, names: Sequence[str]) -> Poll:
        """What an instance's periodic poll brings. This default (a backend without
        triggers or runtime control) brings nothing: no requests, generation 0."""
        return Poll([], 0)

    async def purge(self) -> int:
        """Delete every job, run, attempt, trigger and control record (with change logs and
        offers) of this namespace; how many records.

        For `anarchon purge`: stop every instance using the namespace first. The store's
        key or table layout stays the backend's business.
        """
        raise NotImplementedError(
            f"backend {self.name} cannot purge its namespace; see the Troubleshooting page "
            "for removing it by hand")

    async def watch(self, notify: Callable[[Wakeup], None]) -> None:
        """Deliver the store's wake-ups to ``notify`` until cancelled (optional).

        A backend with a notification channel (Redis/Valkey ``SUBSCRIBE``, PostgreSQL
        ``LISTEN``) calls ``notify(Wakeup("up"))`` once listening, then one
        ``Wakeup`` per ``release()`` and
        [`request_trigger()`][anarchon.backends.capabilities.TriggerStore.request_trigger]
        made by any instance; on losing the channel ``Wakeup("down")``, and ``"up"`` again after
        reconnecting (it retries by itself). It never raises, except on cancellation;
        it closes what it opened when cancelled.

        This default returns at once without calling ``notify``: the engine then polls
        (triggers and watched runs every heartbeat), which is always correct, only slower.
        """
        return


class ClaimBackend(Backend):
    """A backend that only picks one winner per slot (no leases)."""


class LeaseBackend(Backend):
    """A backend that holds a lease per run. Adds renew, release and recovery."""

    def lease_clone(self) -> LeaseBackend | None:
        """A new, unopened backend on the same store with a connection of its own, or
        ``None`` when there is none to make (built on a client or connection the
        application passed in). The scheduler renews leases through it on a thread of
        its own, where no handler can block the renewals."""
        return None

    @abstractmethod
    async def heartbeat(self, owner: str, held: Sequence[HeldRun],
                        watched: Sequence[RunKey], lease_ms: int) -> HeartbeatResult:
        """In one round trip: renew every held lease to ``now + lease_ms`` (fenced) and
        read the state of every watched run."""

    @abstractmethod
    async def release(self, owner: str, run: HeldRun) -> bool:
        """Hand a run over: expire its lease now and mark it handed over (fenced)."""

    @abstractmethod
    async def unfinished(self, names: Sequence[str]) -> list[RunState]:
        """Runs of these jobs still marked running (start-up recovery and watching)."""

    @abstractmethod
    async def note(self, owner: str, run: HeldRun, text: str) -> bool:
        """Attach a detail text to a running attempt's record, which stays ``running``.

        The text is stored as the record's ``error`` (e.g. ``"retrying: ValueError: …"``
        while a task queue retries the run) and replaced by the attempt's outcome: a
        finish writes its own error, so a success clears it. Fenced like
        [`finish()`][anarchon.backends.base.LeaseBackend.finish]:
        True only if ``(owner, attempt)`` still holds the run and its attempt record is
        still running; otherwise nothing changes (a finished, handed-over or replaced
        attempt, another owner's attempt) and the answer is False.
        """
