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
from typing import Any, Final

from ...durations import parse_duration
from ...errors import StoreError
from ...history import RunRecord, RunStatus
from ...jobs.name_checks import check_table_name
from ..base import (
    ClaimRequest,
    ClaimResult,
    Finish,
    HeldRun,
    JobSpec,
    LeaseBackend,
    RunState,
    Wakeup,
)
from ..batches import check_claims, check_finishes, check_skips, lone
from ..capabilities import BatchStore, SkipStore
from ..decoding import history_row, readable
from ..frameworks import stored_kind, stored_spec
from ..skips import Skip
from ..urls import redact, split_options, url_flag
from ..wakeups import keep_listening
from .control import PostgresControl
from .formats import PostgresFormat
from .listen import listen_target, notifications, wake_channel
from .liveness import PostgresLiveness, live_queries
from .triggers import PostgresTriggers, trigger_queries

try:
    import psycopg
    import psycopg.conninfo
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

_INSTALL_HINT: Final = ('PostgresBackend needs psycopg 3: pip install "anarchon[postgres]" '
                       '(or "anarchon[postgres-binary]" where no libpq is installed)')
# Query parameters that configure anarchon; everything else in the URL goes to libpq.
_URL_OPTIONS: Final = ("table", "pool_size", "connect_timeout_s", "create")
#: calls that change nothing when sent twice: sent again after any lost connection
_IDEMPOTENT: Final = frozenset({
    "known_jobs", "confirm", "heartbeat", "unfinished", "history", "poll", "read_controls",
    "change_log", "read_value", "register", "offer_handlers"})


class PostgresBackend(PostgresControl, PostgresTriggers, PostgresLiveness, PostgresFormat,
                      SkipStore, BatchStore, LeaseBackend):
    """Leases, history and job records in PostgreSQL tables.

    ``connection`` is a libpq DSN or ``postgresql://`` URL (the backend then owns a
    small ``AsyncConnectionPool`` and closes it in ``close()``), or a psycopg
    ``Connection``/``AsyncConnection`` (must be in autocommit mode) or a psycopg_pool
    ``ConnectionPool``/``AsyncConnectionPool`` the application owns: those are never
    closed. ``table`` (``name`` or ``schema.name``) prefixes the tables, so services
    with different tables on one database never see each other. ``create_tables=False``
    (``?create=0``) creates and alters nothing: the tables must exist (made from
    :meth:`schema_sql`), and a role with only read/write rights on them suffices.
    """

    name = "postgres"

    def __init__(self, connection: object = "postgresql://localhost/postgres", *,
                 table: str = "anarchon_runs", pool_size: int = 4,
                 connect_timeout: float | str = 10.0, create_tables: bool = True) -> None:
        if _MISSING is not None:
            raise ImportError(f"{_INSTALL_HINT} ({_MISSING})") from _MISSING
        schema, base = check_table_name(table)
        if isinstance(pool_size, bool) or not isinstance(pool_size, int) or pool_size < 1:
            raise ValueError(f"pool_size must be an int >= 1, got {pool_size!r}")
        if not isinstance(create_tables, bool):
            raise TypeError(f"create_tables must be a bool, got {create_tables!r}")
        self.table = table
        self.create_tables = create_tables
        self._values_ready = not create_tables  # the values table is checked at open()
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
            "instances": ident("_instances"),
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
        self._live_queries = live_queries(q)
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

        ``table``, ``pool_size``, ``connect_timeout_s`` and ``create`` (``0``/``1``:
        ``create_tables``) are taken out of the query
        string; every other parameter (``sslmode``, ``connect_timeout`` …) stays in the
        URL handed to libpq. Keyword ``options`` override the URL's.
        """
        dsn, ours = split_options(url, _URL_OPTIONS, keep_blank=True, keep_fragment=True)
        try:  # libpq's own check, before any connection: a mistyped parameter is named
            psycopg.conninfo.conninfo_to_dict(dsn)
        except psycopg.Error as exc:
            raise ValueError(f"invalid PostgreSQL URL {redact(url)}: {str(exc).strip()}; "
                             "anarchon's "
                             f"parameters: {sorted(_URL_OPTIONS)}, the others go to libpq "
                             "(sslmode, connect_timeout, application_name …)") from None
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
        if "create" in ours:
            kwargs["create_tables"] = url_flag("create", ours["create"])
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
        """One statement; sent again on a new connection if its connection was dropped
        (see ``claims.dropped()``)."""
        async def send() -> list[Row]:
            async with self._session(what, heartbeat) as session:
                return await session.fetch(query, params)

        return await with_retries(send, idempotent=what in _IDEMPOTENT)

    async def _serialised(self, what: str, statements: Sequence[Statement]) -> list[list[Row]]:
        """The statements as one transaction in one round trip (sent again after a
        deadlock or serialisation failure, or a dropped connection)."""
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
                    if self.create_tables:
                        await self._tables.setup(session, self.address)
                    else:
                        await self._tables.check(session, self.address)
            except BaseException as exc:
                self._link = None
                await link.close()
                if isinstance(exc, psycopg.Error):
                    raise self._error("creating tables", exc) from exc
                raise

    def schema_sql(self) -> str:
        """The SQL that creates this backend's tables, for a DBA to run as their owner
        (``anarchon schema --backend URL`` prints it); no connection is made."""
        return self._tables.ddl()

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
        return readable(rows, lambda row: stored_spec(*row), self._where("jobs"), repr)

    async def purge(self) -> int:
        """Empty this table namespace in one statement (the tables stay), then the
        shared values (a table made on first use)."""
        rows = await self._fetch("purge", self._q_purge)
        return int(rows[0][0]) + await self.purge_values()

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
        return readable(rows, history_row, self._where("attempts"), repr)

    def _where(self, table: str) -> str:
        return f"PostgreSQL at {self.address}, table {self.table}_{table}"

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
                               connect_timeout=self.connect_timeout,
                               create_tables=self.create_tables)

    def __repr__(self) -> str:
        return f"PostgresBackend({self.address!r}, table={self.table!r})"


__all__ = ["PostgresBackend"]
