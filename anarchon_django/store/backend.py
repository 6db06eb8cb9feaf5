"""DjangoBackend: the ``"django"`` backend, a lease store on the project's own database.

The store is four ordinary models (``anarchon_django.store.models``) created by this
app's migrations, read and written through the ORM on the database alias that
``ANARCHON["OPTIONS"]["database"]`` names or, by default, that ``DATABASE_ROUTERS`` pick
for writing ``StoreRun`` (``"default"`` without
routers). So it works on every database Django has a backend for and anarchon knows the
clock of (SQLite, PostgreSQL, MySQL/MariaDB), with the project's credentials, TLS and
connection options, and follows the project's routers.

The ORM is synchronous and its connections are per thread: every operation (a batch of
claims or finishes included: one transaction, one call) runs in one
thread of this backend's own (see ``anarchon_django.store.worker`` for why not
``sync_to_async``), and ``close()`` closes that thread's connection.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar
from urllib.parse import urlsplit

from django.db import connections, router

from anarchon.backends.base import (
    ClaimRequest,
    ClaimResult,
    Finish,
    HeartbeatResult,
    HeldRun,
    JobSpec,
    LeaseBackend,
    Poll,
    RunKey,
    RunState,
    TriggerRequest,
)
from anarchon.backends.batches import check_claims, check_finishes, check_skips
from anarchon.backends.capabilities import (
    BatchStore,
    ControlStore,
    LivenessStore,
    SkipStore,
    ValueStore,
)
from anarchon.backends.control import ControlChange, ControlSnapshot
from anarchon.backends.liveness import InstanceInfo, Instances
from anarchon.backends.skips import Skip
from anarchon.durations import DurationLike, parse_duration
from anarchon.errors import IncompatibleStoreError
from anarchon.history import RunRecord, RunStatus

from . import heartbeat_rounds, liveness
from .formats import DjangoFormat
from .models import StoreRun
from .operations import Store
from .skip_records import record_skips
from .worker import CLOCK_SQL, OrmThread

T = TypeVar("T")


def store_alias(database: str | None = None) -> str:
    """The database alias the store lives in: ``database``, else the routers' choice."""
    alias = database or router.db_for_write(StoreRun)
    if alias not in connections:
        raise ValueError(f"database {alias!r} is not in DATABASES "
                         f"(known: {', '.join(sorted(connections.settings))})")
    vendor = connections[alias].vendor
    if vendor not in CLOCK_SQL:
        raise ValueError(
            f"the 'django' backend supports SQLite, PostgreSQL and MySQL/MariaDB databases, "
            f"not {vendor!r} (DATABASES[{alias!r}]); set ANARCHON['BACKEND'] to a store URL "
            "such as 'redis://localhost:6379'")
    return alias


class DjangoBackend(ControlStore, ValueStore, SkipStore, BatchStore, LivenessStore, DjangoFormat,
                    LeaseBackend):
    """Leases and history in the project's database, through the Django ORM.

    ``database``: the alias (default: what ``DATABASE_ROUTERS`` choose for writing
    ``StoreRun``, i.e. ``"default"`` without routers). ``trigger_ttl``: a manual-run
    request no instance has taken within this long is dropped (``anarchon_django``
    default: ``max(lease, 1 min)``). The tables come from ``manage.py migrate``;
    ``open()`` checks they are there.
    """

    name = "django"

    def __init__(self, database: str | None = None, *,
                 trigger_ttl: DurationLike = 60.0) -> None:
        self.alias = store_alias(database)
        ttl = parse_duration(trigger_ttl, option="trigger_ttl")
        #: ``django:sqlite``, ``django:postgresql``, ``django:mysql``
        self.name = f"django:{connections[self.alias].vendor}"
        self.store = Store(self.alias, int(ttl * 1000))
        self._thread = OrmThread(self.alias)
        self._checked = False

    @property
    def trigger_ttl(self) -> float:
        """How long a manual-run request waits for an instance before it is dropped
        (seconds; ``anarchon.backends.trigger_rules``)."""
        return self.store.trigger_ttl_ms / 1000

    @trigger_ttl.setter
    def trigger_ttl(self, value: float | None) -> None:
        self.store.trigger_ttl_ms = int((60.0 if value is None else value) * 1000)

    def trigger_ttl_ms(self) -> int:
        """``trigger_ttl`` in milliseconds."""
        return self.store.trigger_ttl_ms

    @property
    def stale_manual_after(self) -> float:
        """How long a running manual attempt blocks a new request (seconds)."""
        return self.store.stale_manual_ms / 1000

    @stale_manual_after.setter
    def stale_manual_after(self, value: float) -> None:
        self.store.stale_manual_ms = int(value * 1000)

    def stale_manual_ms(self) -> int:
        """``stale_manual_after`` in milliseconds."""
        return self.store.stale_manual_ms

    def __repr__(self) -> str:
        return f"<DjangoBackend {self.name} database {self.alias!r}>"

    @classmethod
    def from_url(cls, url: str, **options: Any) -> DjangoBackend:
        """``django://ALIAS`` (the ``DATABASES`` alias) or ``django://`` (the routers')."""
        parts = urlsplit(url)
        if parts.path not in ("", "/") or parts.query:
            raise ValueError(f"invalid Django store URL {url!r}: use django://ALIAS")
        return cls(options.pop("database", None) or parts.netloc or None, **options)

    async def _call(self, fn: Callable[[], T]) -> T:
        if not self._checked:
            await self.open()
        return await self._thread.call(fn)

    async def open(self) -> None:
        if self._checked:
            return
        tables = await self._thread.call(self._tables)
        missing = sorted({"anarchon_django_store_job", "anarchon_django_store_run",
                          "anarchon_django_store_attempt", "anarchon_django_store_trigger",
                          "anarchon_django_store_value", "anarchon_django_store_control",
                          "anarchon_django_store_change", "anarchon_django_store_offer",
                          "anarchon_django_store_generation",
                          "anarchon_django_store_instance"} - tables)
        if missing:
            raise IncompatibleStoreError(
                f"the anarchon store tables {missing} are missing from database "
                f"{self.alias!r}: run 'python manage.py migrate anarchon_django"
                f" --database {self.alias}'")
        self._checked = True

    def _tables(self) -> set[str]:
        connection = connections[self.alias]
        with connection.cursor() as cursor:
            return set(connection.introspection.table_names(cursor))

    async def close(self) -> None:
        self._checked = False
        await self._thread.close()

    async def register(self, jobs: Sequence[JobSpec]) -> None:
        if jobs:
            await self._call(lambda: self.store.register(jobs))

    async def claim(self, request: ClaimRequest) -> ClaimResult:
        return await self._call(lambda: self.store.claim(request))

    async def claim_many(self, requests: Sequence[ClaimRequest]
                         ) -> list[ClaimResult | Exception]:
        """One transaction (one call to the ORM thread) for all the requests, each judged
        as a lone claim is, in order, at one store time, the version fence per request;
        all are checked before any write."""
        check_claims(requests)
        if not requests:
            return []
        return list(await self._call(lambda: self.store.claim_many(requests)))

    async def confirm(self, request: ClaimRequest) -> int:
        return await self._call(lambda: self.store.confirm(request))

    async def heartbeat(self, owner: str, held: Sequence[HeldRun],
                        watched: Sequence[RunKey], lease_ms: int) -> HeartbeatResult:
        return await self._call(lambda: self.store.heartbeat(owner, held, watched, lease_ms))

    async def heartbeat_live(self, owner: str, held: Sequence[HeldRun],
                             watched: Sequence[RunKey], lease_ms: int, info: InstanceInfo,
                             ttl_ms: int) -> HeartbeatResult:
        """The heartbeat and the record's upsert, in one transaction."""
        return await self._call(lambda: heartbeat_rounds.heartbeat(
            self.store.tables, owner, held, watched, lease_ms,
            also=lambda now: liveness.write(self.store.tables, info, ttl_ms, now)))

    async def leave(self, instance_id: str) -> None:
        await self._call(lambda: liveness.leave(self.store.tables, instance_id))

    async def instances(self) -> Instances:
        return await self._call(lambda: liveness.read(self.store.tables))

    async def release(self, owner: str, run: HeldRun) -> bool:
        return await self._call(lambda: self.store.release(owner, run))

    async def note(self, owner: str, run: HeldRun, text: str) -> bool:
        """Store ``text`` as the running attempt's ``error``, fenced by ``(owner, attempt)``."""
        return await self._call(lambda: self.store.note(owner, run, text))

    async def unfinished(self, names: Sequence[str]) -> list[RunState]:
        return await self._call(lambda: self.store.unfinished(names))

    async def finish(self, finish: Finish) -> bool:
        return await self._call(lambda: self.store.finish(finish))

    async def finish_many(self, finishes: Sequence[Finish]) -> list[bool | Exception]:
        """Every outcome in one transaction (one call to the ORM thread), each recorded as
        ``finish()`` would; all are checked before any write."""
        check_finishes(finishes)
        if not finishes:
            return []
        return list(await self._call(lambda: self.store.finish_many(finishes)))

    async def record_skips(self, skips: Sequence[Skip]) -> None:
        """Every skip record in one transaction (all checked first)."""
        checked = check_skips(skips)
        if checked:
            await self._call(lambda: record_skips(self.store.tables, checked))

    async def start_manual(self, name: str, owner: str, started_ms: int) -> str:
        return await self._call(lambda: self.store.start_manual(name, owner, started_ms))

    async def finish_manual(self, token: str, status: RunStatus, error: str | None,
                            history_size: int, history_ttl_ms: int | None) -> None:
        await self._call(lambda: self.store.finish_manual(token, status, error, history_size,
                                                          history_ttl_ms))

    async def history(self, name: str, count: int) -> list[RunRecord]:
        return await self._call(lambda: self.store.history(name, count))

    async def known_jobs(self) -> list[JobSpec]:
        return await self._call(self.store.known_jobs)

    async def request_trigger(self, name: str, data: str | None, *,
                              exclusive: bool = False) -> str:
        """Store a manual-run request (one transaction under the job row's lock; see
        ``anarchon.backends.trigger_rules``)."""
        return await self._call(lambda: self.store.request_trigger(name, data, exclusive))

    async def forget(self, name: str) -> int:
        """Delete every row of job ``name`` (one transaction); how many."""
        return await self._call(lambda: self.store.forget(name))

    async def take_triggers(self, names: Sequence[str]) -> list[TriggerRequest]:
        return await self._call(lambda: self.store.take_triggers(names))

    async def read_value(self, name: str, field: str) -> str | None:
        return await self._call(lambda: self.store.read_value(name, field))

    async def swap_value(self, name: str, field: str, expected: str | None,
                         value: str) -> bool:
        return await self._call(lambda: self.store.swap_value(name, field, expected, value))

    async def poll(self, names: Sequence[str]) -> Poll:
        """The pending triggers and the control generation: one query when none is
        pending."""
        return await self._call(lambda: self.store.poll(names))

    async def read_controls(self) -> ControlSnapshot:
        return await self._call(self.store.read_controls)

    async def change_control(self, change: ControlChange) -> int:
        """Compare-and-set of job ``change.name``'s control record (one transaction).
        The store has no wake-up channel: instances see the change at their next poll."""
        return await self._call(lambda: self.store.change_control(change))

    async def change_log(self, name: str, count: int) -> list[str]:
        return await self._call(lambda: self.store.change_log(name, count))

    async def offer_handlers(self, instance_id: str, handlers: Sequence[str]) -> None:
        await self._call(lambda: self.store.offer_handlers(instance_id, handlers))

    async def purge(self) -> int:
        """Delete every job, run, attempt, trigger, control record, change-log entry and
        handler offer (the tables stay; so do shared values)."""
        return await self._call(self.store.purge)
