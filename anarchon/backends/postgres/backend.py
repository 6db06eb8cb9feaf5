"""PostgreSQL lease backend on psycopg 3.

A claim is one round trip: ``BEGIN; pg_advisory_xact_lock(table, job); <claim>; COMMIT``
sent as one pipeline. The advisory lock serialises claims of one job, so the claim
statement (which starts after the lock is granted and so reads a fresh READ COMMITTED
snapshot) sees every earlier claim of that job: overlap checks across slots cannot race.
Heartbeat, release, finish and history pruning are one autocommit statement each.
Requires PostgreSQL 12+ (``plan_cache_mode``, see ``.claims``; ``.queries`` needs 9.5).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Sequence
from datetime import datetime, timezone
from typing import Any, Final

from ...durations import parse_duration
from ...errors import StoreError
from ...history import RunRecord, RunStatus
from ...names import check_table_name
from ..base import (
    ClaimRequest,
    ClaimResult,
    Finish,
    HeartbeatResult,
    HeldRun,
    JobSpec,
    LeaseBackend,
    RunKey,
    RunState,
    Wakeup,
)
from ..batches import check_claims, check_finishes, check_skips, lone
from ..frameworks import stored_kind, stored_spec
from ..skips import Skip
from ..urls import split_options
from ..wakeups import keep_listening
from .control import PostgresControl
from .listen import listen_target, notifications, wake_channel
from .triggers import PostgresTriggers, trigger_queries

try:
    import psycopg
    from psycopg import sql

    from . import control, queries
    from .claims import Statements, claim_answers, finish_answers, with_retries
    from .links import Link, Params, Query, Row, Session, Statement, make_link
    from .skips import RECORD_SKIPS, skip_statements
    from .tables import Tables
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    _MISSING: ImportError | None = exc
else:
    _MISSING = None

_INSTALL_HINT: Final = 'PostgresBackend needs psycopg 3: pip install "anarchon[postgres]"'
# Query parameters that configure anarchon; everything else in the URL goes to libpq.
_URL_OPTIONS: Final = ("table", "pool_size", "connect_timeout_s")


def _ms_to_datetime(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc)


class PostgresBackend(PostgresControl, PostgresTriggers, LeaseBackend):
    """Leases, history and job records in PostgreSQL tables.

    ``connection`` is a libpq DSN or ``postgresql://`` URL (the backend then owns a
    small ``AsyncConnectionPool`` and closes it in ``close()``), or a psycopg
    ``Connection``/``AsyncConnection`` (must be in autocommit mode) or a psycopg_pool
    ``ConnectionPool``/``AsyncConnectionPool`` the application owns: those are never
    closed. ``table`` (``name`` or ``schema.name``) prefixes the tables, so services
    with different tables on one database never see each other.
    """

    name = "postgres"
    supports_triggers = True
    supports_values = True
    supports_claim_batches = True
    supports_control = True
    supports_skip_records = True

    def __init__(self, connection: object = "postgresql://localhost/postgres", *,
                 table: str = "anarchon_runs", pool_size: int = 4,
                 connect_timeout: float | str = 10.0) -> None:
        if _MISSING is not None:
            raise ImportError(f"{_INSTALL_HINT} ({_MISSING})") from _MISSING
        schema, base = check_table_name(table)
        if isinstance(pool_size, bool) or not isinstance(pool_size, int) or pool_size < 1:
            raise ValueError(f"pool_size must be an int >= 1, got {pool_size!r}")
        self.table = table
        self.connect_timeout = parse_duration(connect_timeout, option="connect_timeout")
        self._connection = connection
        self._pool_size = pool_size
        self._link: Link | None = None
        self._open_lock = asyncio.Lock()
        # the text form is used only for to_regclass() and advisory lock keys
        self._qualified = f'"{schema}"."{base}"' if schema else f'"{base}"'

        def ident(suffix: str) -> sql.Identifier:
            return sql.Identifier(schema, base + suffix) if schema else sql.Identifier(
                base + suffix)

        ids = {
            "runs": ident(""), "attempts": ident("_attempts"), "jobs": ident("_jobs"),
            "meta": ident("_meta"), "triggers": ident("_triggers"),
            "control": ident("_control"), "changes": ident("_changes"),
            "offers": ident("_offers"), "changes_job": sql.Identifier(base + "_changes_job"),
            "runs_running": sql.Identifier(base + "_running"),
            "attempts_job": sql.Identifier(base + "_attempts_job"),
            "attempts_run": sql.Identifier(base + "_attempts_run"),
        }

        def q(text: str) -> sql.Composed:
            return sql.SQL(text).format(**ids)

        self._tables = Tables(schema, base, self._qualified, q)
        self._control_queries = {
            "poll": q(control.POLL), "read": q(control.READ), "change": q(control.CHANGE),
            "lock": sql.SQL(queries.JOB_LOCK), "log": q(control.CHANGE_LOG),
            "offer": q(control.OFFER), "withdraw": q(control.WITHDRAW)}
        self._q_register = q(queries.REGISTER)
        self._q_known = q(queries.KNOWN_JOBS)
        self._q_purge = q(queries.PURGE)
        self._trigger_queries = trigger_queries(q)
        self._statements = Statements(
            table=self._qualified, lock=sql.SQL(queries.JOB_LOCK), new=q(queries.CLAIM_NEW),
            takeover=q(queries.CLAIM_TAKEOVER), finish=q(queries.FINISH))
        self._q_confirm = q(queries.CONFIRM)
        self._q_heartbeat = q(queries.HEARTBEAT)
        self._q_release = q(queries.RELEASE)
        self._q_note = q(queries.NOTE)
        self._q_start_manual = q(queries.START_MANUAL)
        self._q_finish_manual = q(queries.FINISH_MANUAL)
        self._q_history = q(queries.HISTORY)
        self._q_record_skips = q(RECORD_SKIPS)
        self._q_unfinished = q(queries.UNFINISHED)
        self.channel = wake_channel(schema, base)
        self._q_listen = sql.SQL("LISTEN {}").format(sql.Identifier(self.channel))

    @classmethod
    def from_url(cls, url: str, **options: Any) -> PostgresBackend:
        """Build from ``postgresql://user@host/db?table=schema.name``.

        ``table``, ``pool_size`` and ``connect_timeout_s`` are taken out of the query
        string; every other parameter (``sslmode``, ``connect_timeout`` …) stays in the
        URL handed to libpq. Keyword ``options`` override the URL's.
        """
        dsn, ours = split_options(url, _URL_OPTIONS, keep_blank=True, keep_fragment=True)
        kwargs: dict[str, Any] = {}
        if "table" in ours:
            kwargs["table"] = ours["table"]
        if "pool_size" in ours:
            try:
                kwargs["pool_size"] = int(ours["pool_size"])
            except ValueError:
                raise ValueError(f"pool_size must be an int, got {ours['pool_size']!r} "
                                 "in the backend URL") from None
        if "connect_timeout_s" in ours:
            kwargs["connect_timeout"] = ours["connect_timeout_s"]
        kwargs.update(options)
        return cls(dsn, **kwargs)

    # -- plumbing ---------------------------------------------------------------

    @property
    def address(self) -> str:
        """``host:port/dbname`` of the server (never the password)."""
        if self._link is not None:
            return self._link.address
        if isinstance(self._connection, str):
            from .links import describe_conninfo

            return describe_conninfo(self._connection)
        return type(self._connection).__name__

    def _error(self, what: str, exc: BaseException) -> StoreError:
        return StoreError(f"PostgreSQL at {self.address} (table {self.table}): {what} "
                          f"failed: {exc}".strip())

    @contextlib.asynccontextmanager
    async def _session(self, what: str, heartbeat: bool = False) -> AsyncIterator[Session]:
        if self._link is None:
            await self.open()
        link = self._link
        assert link is not None
        try:
            async with link.session(heartbeat=heartbeat) as session:
                yield session
        except psycopg.Error as exc:
            raise self._error(what, exc) from exc

    async def _fetch(self, what: str, query: Query, params: Params | None = None, *,
                     heartbeat: bool = False) -> list[Row]:
        async with self._session(what, heartbeat) as session:
            return await session.fetch(query, params)

    async def _serialised(self, what: str, statements: Sequence[Statement]) -> list[list[Row]]:
        """The statements as one transaction in one round trip (sent again after a
        deadlock or serialisation failure)."""
        async def send() -> list[list[Row]]:
            async with self._session(what) as session:
                return await session.serialised(statements)

        return await with_retries(send)

    # -- lifecycle --------------------------------------------------------------

    async def open(self) -> None:
        """Connect, then create the tables if absent (or check their format version)."""
        async with self._open_lock:
            if self._link is not None:
                return
            link = make_link(self._connection, self._pool_size)
            try:
                await link.open(self.connect_timeout)
            except psycopg.Error as exc:
                raise self._error("connect", exc) from exc
            self._link = link
            try:
                async with link.session() as session, session.transaction():
                    await self._tables.setup(session, self.address)
            except BaseException as exc:
                self._link = None
                await link.close()
                if isinstance(exc, psycopg.Error):
                    raise self._error("creating tables", exc) from exc
                raise

    async def close(self) -> None:
        """Close our pool; return the reserved heartbeat connection to a user's pool."""
        async with self._open_lock:
            link, self._link = self._link, None
            if link is not None:
                await link.close()

    # -- jobs -------------------------------------------------------------------

    async def register(self, jobs: Sequence[JobSpec]) -> None:
        """Record the jobs; the first-seen time (store clock) is kept on conflict."""
        if not jobs:
            return
        await self._fetch("register", self._q_register, {
            "names": [j.name for j in jobs], "kinds": [stored_kind(j) for j in jobs],
            "schedules": [j.schedule for j in jobs]})

    async def known_jobs(self) -> list[JobSpec]:
        """Every job any instance registered in this table namespace."""
        rows = await self._fetch("known_jobs", self._q_known)
        return [stored_spec(name, kind, schedule, registered)
                for name, kind, schedule, registered in rows]

    async def purge(self) -> int:
        """Empty this table namespace in one statement (the tables stay)."""
        rows = await self._fetch("purge", self._q_purge)
        return int(rows[0][0])

    # -- claims -----------------------------------------------------------------

    async def claim(self, request: ClaimRequest) -> ClaimResult:
        """One round trip, serialised per job by an advisory lock. See ClaimRequest."""
        return await lone(self.claim_many, request)

    async def claim_many(self, requests: Sequence[ClaimRequest]
                         ) -> list[ClaimResult | Exception]:
        """One round trip for all the requests (one transaction: the jobs' advisory
        locks, then one statement for the new slots and one for the takeovers), each
        judged as a lone claim is, in order; every request is checked before any write."""
        check_claims(requests)
        if not requests:
            return []
        rows = await self._serialised("claim", self._statements.claims(requests))
        return list(claim_answers(rows, len(requests)))

    async def confirm(self, request: ClaimRequest) -> int:
        """The attempt ``request.owner`` holds on the slot (0 if none): read back after
        a claim whose reply was lost."""
        rows = await self._fetch("confirm", self._q_confirm, {
            "job": request.name, "slot": request.slot, "owner": request.owner})
        if not rows:
            return 0
        attempt = int(rows[0][0])
        if request.reason == "takeover" and attempt != request.expected_attempt + 1:
            return 0
        return attempt

    # -- leases -----------------------------------------------------------------

    async def heartbeat(self, owner: str, held: Sequence[HeldRun],
                        watched: Sequence[RunKey], lease_ms: int) -> HeartbeatResult:
        """Renew held leases and read watched runs in one statement, on the connection
        reserved for heartbeats."""
        if not held and not watched:
            return HeartbeatResult(lost=frozenset(), watched=[])
        rows = await self._fetch("heartbeat", self._q_heartbeat, {
            "owner": owner, "lease_ms": lease_ms,
            "held_jobs": [h.name for h in held], "held_slots": [h.slot for h in held],
            "held_attempts": [h.attempt for h in held],
            "watched_jobs": [w.name for w in watched],
            "watched_slots": [w.slot for w in watched]}, heartbeat=True)
        renewed = {RunKey(r[1], int(r[2])) for r in rows if r[0]}
        states = [RunState(name=r[1], slot=int(r[2]), owner=r[3], attempt=int(r[4]),
                           running=bool(r[5]), lease_expired=bool(r[6]),
                           handed_over=bool(r[7]))
                  for r in rows if not r[0]]
        lost = frozenset(h.key for h in held if h.key not in renewed)
        return HeartbeatResult(lost=lost, watched=states)

    async def release(self, owner: str, run: HeldRun) -> bool:
        """Expire the lease now and mark the run handed over (fenced)."""
        rows = await self._fetch("release", self._q_release, {
            "job": run.name, "slot": run.slot, "owner": owner, "attempt": run.attempt,
            "channel": self.channel})
        return bool(rows[0][0])

    async def unfinished(self, names: Sequence[str]) -> list[RunState]:
        """Runs of these jobs still marked running, oldest slot first per job."""
        if not names:
            return []
        rows = await self._fetch("unfinished", self._q_unfinished, {"names": list(names)})
        return [RunState(name=r[0], slot=int(r[1]), owner=r[2], attempt=int(r[3]),
                         running=True, lease_expired=bool(r[4]), handed_over=bool(r[5]))
                for r in rows]

    async def note(self, owner: str, run: HeldRun, text: str) -> bool:
        """Store ``text`` as the running attempt's ``error`` (one UPDATE, fenced)."""
        rows = await self._fetch("note", self._q_note, {
            "job": run.name, "slot": run.slot, "attempt": run.attempt, "owner": owner,
            "text": text})
        return bool(rows)

    # -- outcomes and history ---------------------------------------------------

    async def finish(self, finish: Finish) -> bool:
        """Record the outcome and prune history, fenced by ``(owner, attempt)``."""
        return await lone(self.finish_many, finish)

    async def finish_many(self, finishes: Sequence[Finish]) -> list[bool | Exception]:
        """Record every outcome (each as ``finish()`` would, fenced per run) in one
        round trip and one transaction; every finish is checked before any write."""
        check_finishes(finishes)
        if not finishes:
            return []
        rows = await self._serialised("finish", self._statements.finishes(finishes))
        return list(finish_answers(rows, len(finishes)))

    async def record_skips(self, skips: Sequence[Skip]) -> None:
        """Every skip record in one transaction and round trip (all checked first)."""
        checked = check_skips(skips)
        if checked:
            await self._serialised("record_skips", skip_statements(
                self._qualified, sql.SQL(queries.JOB_LOCK), self._q_record_skips, checked))

    async def start_manual(self, name: str, owner: str, started_ms: int) -> str:
        """Insert a running manual attempt; the token is its row id."""
        rows = await self._fetch("start_manual", self._q_start_manual, {
            "job": name, "owner": owner, "started_ms": started_ms})
        return str(rows[0][0])

    async def finish_manual(self, token: str, status: RunStatus, error: str | None,
                            history_size: int, history_ttl_ms: int | None) -> None:
        """Record a manual run's outcome and prune the job's history."""
        await self._fetch("finish_manual", self._q_finish_manual, {
            "id": int(token), "status": status, "error": error,
            "history_size": max(1, history_size), "history_ttl_ms": history_ttl_ms})

    async def history(self, name: str, count: int) -> list[RunRecord]:
        """Newest-first attempts of ``name`` written by any instance."""
        if count <= 0:
            return []
        rows = await self._fetch("history", self._q_history, {"job": name, "count": count})
        records = []
        for (job, slot, instance, manual, attempt, reason, status, started, finished,
             error) in rows:
            records.append(RunRecord(
                name=job, slot=int(slot), scheduled_at=_ms_to_datetime(int(slot)),
                instance_id=instance, manual=bool(manual), attempt=int(attempt),
                reason=reason, status=status, started_at=_ms_to_datetime(int(started)),
                finished_at=None if finished is None else _ms_to_datetime(int(finished)),
                duration=None if finished is None else (int(finished) - int(started)) / 1000,
                error=error))
        return records

    # -- wake-ups ---------------------------------------------------------------

    async def watch(self, notify: Callable[[Wakeup], None]) -> None:
        """``LISTEN`` on the table's channel (``channel``) on a dedicated connection and
        deliver wake-ups (hand-overs, trigger requests and control changes, sent by
        ``pg_notify`` in the same statement) until cancelled; reconnects by itself.

        Needs connection settings to open that connection: a DSN, or a pool whose
        ``conninfo`` is a string. With a single connection passed in there is none:
        returns at once and the engine polls."""
        await self.open()
        target = listen_target(self._link, self.connect_timeout)
        if target is None:
            return
        await keep_listening(f"PostgreSQL at {self.address} (table {self.table})",
                             lambda: notifications(target, self._q_listen, self.channel),
                             notify)

    def lease_clone(self) -> PostgresBackend | None:
        """A backend of the same conninfo with a one-connection pool; ``None`` on the
        application's own connection or pool."""
        if not isinstance(self._connection, str):
            return None
        return PostgresBackend(self._connection, table=self.table, pool_size=1,
                               connect_timeout=self.connect_timeout)

    def __repr__(self) -> str:
        return f"PostgresBackend({self.address!r}, table={self.table!r})"


__all__ = ["PostgresBackend"]
