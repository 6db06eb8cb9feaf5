"""The Redis/Valkey lease strategy: every state change is one Lua script call.

Per job (all keys share the hash tag ``{<prefix>:<job>}``):

* ``runs``   hash ``slot -> {o: owner, a: attempt, c: counted attempts, h: handed over,
  l: lease_until ms, s: status, r: reason}`` (status ``skipped`` marks an overlap skip);
* ``active`` zset of running slots scored by ``lease_until`` (overlap, expiry, recovery);
* ``done``   zset of finished slots scored by their end, to forget old runs after
  ``retain_runs_ms``;
* ``att``/``hist`` attempt records (hash ``"<slot>:<attempt>" -> JSON``, zset scored by
  start) trimmed to ``history_size``/``history_ttl`` (running attempts are kept);
* ``control``/``changes`` the job's control record (read by the claims' version fence)
  and change log;

and one registry hash ``<prefix>jobs`` (``name -> {kind, schedule, first_seen}``). The
namespace's control index, generation and handler offers share the trigger list's slot
(see ``control.py`` for runtime control, and the order of a change's writes on a Cluster).

All times come from the server's ``TIME``. On Redis Cluster, a heartbeat over several
jobs is one script call per job (sent concurrently); on a single server it is one call.
Replication is asynchronous: at a failover an acknowledged claim can be lost, and a
backup may then start the same slot again. The ``(slot, attempt)`` fencing token keeps
the stale runner's later writes from changing anything.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncGenerator, Callable, Sequence
from typing import Any, ClassVar, Literal

from ...errors import StoreError
from ..base import (
    Backend,
    ClaimRequest,
    ClaimResult,
    Finish,
    HeldRun,
    JobSpec,
    LeaseBackend,
    RunState,
    Wakeup,
)
from ..capabilities import BatchStore
from ..decoding import readable
from ..wakeups import keep_listening, released_payload
from .comparisons import check_lab_opt_in, comparison_backend
from .connection import Kind, RedisStore, check_driver, info_dict, text
from .control import RedisControl
from .formats import RedisFormat
from .liveness import RedisLiveness
from .manual_runs import RedisTriggers
from .records import (
    RedisHistory,
    finish_args,
    known_jobs,
    register_jobs,
    run_state,
)
from .skips import RedisSkips
from .urls import split_url
from .values import RedisValues

Strategy = Literal["lease", "stream-id", "script", "idmp"]
STRATEGIES: tuple[str, ...] = ("lease", "stream-id", "script", "idmp")
logger = logging.getLogger("anarchon")


class RedisBackend(RedisTriggers, RedisControl, RedisValues, RedisSkips, RedisLiveness,
                   RedisFormat, RedisHistory, BatchStore, LeaseBackend):
    """Redis (5+) as the store, holding leases (``strategy="lease"``, the only one).

    ``redis`` is a URL, a dict of connection kwargs, or your own redis-py/valkey-py
    client (asyncio or sync; never closed by anarchon). ``prefix`` namespaces every key.
    The claim-only comparison strategies ``"stream-id"``, ``"script"`` (option
    ``window``) and ``"idmp"`` (Redis 8.6+, options ``duration``, ``max_size``) are
    [`ClaimBackend`][anarchon.backends.base.ClaimBackend] s built by
    ``comparison_backend()`` (or ``from_url`` with ``?strategy=…&lab=1``: lab code, refused
    without the opt-in); passing such a ``strategy`` here raises ``TypeError``.
    """

    kind: ClassVar[Kind] = "redis"

    def __init__(self, redis: object = "redis://localhost:6379", *, strategy: str = "lease",
                 prefix: str = "cron:", cluster: bool | None = None,
                 **options: Any) -> None:
        if strategy != "lease":
            # check the comparison's options first: bad input gets the precise error
            with contextlib.suppress(ImportError):  # the lab (anarchon.backends.lab)
                comparison_backend(strategy, redis, kind=self.kind, prefix=prefix,
                                   cluster=cluster, **options)
            raise TypeError(
                f"{type(self).__name__} is the lease backend; build the claim-only "
                f"comparison strategy {strategy!r} with anarchon.backends.redis."
                f"comparison_backend({strategy!r}, ..., kind={self.kind!r}) or from_url("
                f"'{self.kind}://…?strategy={strategy}&lab=1')")
        if options:
            raise TypeError(f"unknown option(s) {', '.join(sorted(options))} for "
                            f"{type(self).__name__}(strategy='lease')")
        check_driver(self.kind, redis)
        self.store = RedisStore(self.kind, redis, prefix, cluster)
        self.name = f"{self.kind}:lease"
        self._first_seen: dict[str, int] = {}
        self._fenced: dict[str, int] = {}

    @classmethod
    def from_url(cls, url: str, **options: Any) -> Backend:
        """Build from ``redis://host:port/db?prefix=cron:&strategy=lease`` (keyword
        options override query parameters). A ``strategy`` other than ``lease`` is lab
        code (a claim-only comparison, no leases): it is refused unless the URL opts in
        with ``lab=1``, and then builds ``comparison_backend()``."""
        client_url, query = split_url(url)
        merged = {**query, **options}
        strategy = merged.pop("strategy", "lease")
        lab = merged.pop("lab", False)
        if strategy != "lease":
            check_lab_opt_in(strategy, cls.kind, lab)
            return comparison_backend(strategy, client_url, kind=cls.kind, **merged)
        return cls(client_url, **merged)

    def lease_clone(self) -> RedisBackend | None:
        """See [`LeaseBackend.lease_clone()`][anarchon.backends.base.LeaseBackend]: a
        backend of the same URL or connection options; ``None`` on the application's own
        client."""
        source = self.store.source
        if not isinstance(source, (str, dict)):
            return None
        return type(self)(source, prefix=self.store.prefix, cluster=self.store.cluster_option)

    def __repr__(self) -> str:
        return (f"<{type(self).__name__} {self.name} {self.store.where} "
                f"prefix={self.store.prefix!r}>")

    # -- lifecycle -----------------------------------------------------------------------

    async def open(self) -> None:
        """Connect and check the server (Redis 5+ for effect-replicated scripts)."""
        await self.store.connect()
        self.store.require_version((5, 0), f"{self.name} (scripts that write after TIME)")

    async def close(self) -> None:
        """Close the client this backend opened (a client passed in is left open)."""
        await self.store.close()

    # -- jobs ------------------------------------------------------------------------------

    async def register(self, jobs: Sequence[JobSpec]) -> None:
        """Record the jobs and keep each one's first-seen time (used for catch-up)."""
        self._first_seen.update(await register_jobs(self.store, jobs))

    async def known_jobs(self) -> list[JobSpec]:
        """Jobs registered by any instance using this prefix."""
        return await known_jobs(self.store)

    async def purge(self) -> int:
        """Unlink the keys of every job registered under this prefix or holding a control
        record, then the prefix's own keys; one command per job (a job's keys share one
        cluster slot) and one for the trigger list's slot."""
        store = self.store
        names = {job.name for job in await known_jobs(store)} | set(await self._control_names())
        removed = 0
        for name in sorted(names):
            removed += int(await store.command("UNLINK", *store.keys(name).every_key))
        removed += int(await store.command("UNLINK", store.triggers_key,
                                           *store.namespace.every_key))
        removed += int(await store.command("UNLINK", store.jobs_key))
        return removed

    async def _first_seen_ms(self, name: str) -> int:
        seen = self._first_seen.get(name)
        if seen is None:
            raw = await self.store.command("HGET", self.store.jobs_key, name)
            if raw is None:
                return -1
            found = readable([raw], lambda r: int(json.loads(text(r))["first_seen"]),
                             f"{self.store.kind} at {self.store.where}, hash "
                             f"{self.store.jobs_key}", lambda r: f"field {name!r} = {r!r}")
            if not found:
                return -1  # unreadable: as if not yet registered (no catch-up)
            seen = found[0]
            self._first_seen[name] = seen
        return seen

    # -- runs ------------------------------------------------------------------------------

    def _run_keys(self, name: str) -> list[str]:
        k = self.store.keys(name)
        return [k.runs, k.active, k.done, k.att, k.hist]

    def _claim_keys(self, name: str) -> list[str]:
        # the control record is in the job's slot: the version fence costs no round trip
        return [*self._run_keys(name), self.store.keys(name).control]

    async def _claim_args(self, request: ClaimRequest, up_since: int) -> list[str]:
        """The 11 script arguments of one claim (see claim_lib.lua)."""
        return [str(a) for a in (
            request.slot, request.owner, request.reason, request.lease_ms,
            request.max_late_ms, request.max_attempts, request.overlap,
            request.catch_up_ms, request.expected_attempt,
            await self._since_ms(request, up_since), request.version)]

    def _result(self, request: ClaimRequest, outcome: Any, attempt: Any, now: Any,
                stored: Any) -> ClaimResult:
        result = ClaimResult(text(outcome), int(attempt), int(now))  # type: ignore[arg-type]
        if result.outcome == "stale":
            self._refused_stale(request.name, int(stored))
        return result

    async def claim(self, request: ClaimRequest) -> ClaimResult:
        """One EVALSHA: server time, lateness, the version fence, overlap, takeover rules,
        record the claim."""
        up_since = await self._up_since_ms([request])
        reply = await self.store.script("claim", self._claim_keys(request.name),
                                        await self._claim_args(request, up_since))
        return self._result(request, *reply[:4])

    async def claim_many(self, requests: Sequence[ClaimRequest]
                         ) -> list[ClaimResult | Exception]:
        """One EVALSHA for all the requests, each judged as ``claim()`` judges it (in
        order, at one server time). On a Cluster the jobs' keys live in different hash
        slots, so each request is its own ``claim()`` call (sent concurrently)."""
        if self.store.cluster:
            return await Backend.claim_many(self, requests)
        if not requests:
            return []
        keys: list[str] = []
        args: list[str] = []
        up_since = await self._up_since_ms(requests)
        for request in requests:
            keys += self._claim_keys(request.name)
            args += await self._claim_args(request, up_since)
        # the arguments travel as one JSON array of strings (data, never code)
        reply = await self.store.script("claim_many", keys, [
            len(requests), json.dumps(args, ensure_ascii=False)])
        return [self._result(request, reply[3 * i + 1], reply[3 * i + 2], reply[0],
                             reply[3 * i + 3])
                for i, request in enumerate(requests)]

    async def _up_since_ms(self, requests: Sequence[ClaimRequest]) -> int:
        """Since when (server ms) the server is up, read for takeovers only (``-1`` when
        there are none): ``TIME`` minus ``INFO server`` uptime, rounded to a later time
        (by up to 2 s: ``uptime_in_seconds`` counts whole seconds), so a lease
        that lapsed while the server was down is not taken over before the server has
        been up for one lease."""
        if not any(r.reason == "takeover" for r in requests):
            return -1
        now, info = await self.store.pipeline([("TIME",), ("INFO", "server")])
        for reply in (now, info):
            if isinstance(reply, Exception):
                raise self.store.translate(reply)
        # whole seconds, each end floored: the real uptime may be a second less
        uptime_s = max(0, int(info_dict(info).get("uptime_in_seconds", "0")) - 1)
        return int(text(now[0])) * 1000 + int(text(now[1])) // 1000 - uptime_s * 1000

    async def _since_ms(self, request: ClaimRequest, up_since: int) -> int:
        if request.reason == "catch-up":
            seen = await self._first_seen_ms(request.name)
            # a one-off job need only be known (-1: it is not), not known before its slot
            return min(seen, 0) if request.one_off else seen
        return up_since if request.reason == "takeover" else -1

    async def confirm(self, request: ClaimRequest) -> int:
        """Read back who holds the run after a claim whose reply was lost."""
        raw = await self.store.command("HGET", self.store.keys(request.name).runs,
                                       str(request.slot))
        if raw is None:
            return 0
        state = json.loads(text(raw))
        attempt = int(state.get("a", 0))
        if state.get("s") != "running" or state.get("o") != request.owner:
            return 0
        if request.reason == "takeover" and attempt <= request.expected_attempt:
            return 0
        return attempt

    async def release(self, owner: str, run: HeldRun) -> bool:
        """Hand the run over: its lease expires now and the next attempt is not counted."""
        k = self.store.keys(run.name)
        done = await self.store.script("release", [k.runs, k.active, k.att], [
            run.slot, owner, run.attempt, self.store.wake_channel,
            released_payload(run.name, run.slot, run.attempt)])
        return bool(int(done))

    async def note(self, owner: str, run: HeldRun, text: str) -> bool:
        """Store ``text`` as the running attempt's ``error`` (one script call, fenced)."""
        k = self.store.keys(run.name)
        done = await self.store.script("note", [k.runs, k.att],
                                       [run.slot, owner, run.attempt, text])
        return bool(int(done))

    async def finish(self, finish: Finish) -> bool:
        """Record the outcome if ``(owner, attempt)`` still holds the run."""
        done = await self.store.script("finish", self._run_keys(finish.name),
                                       finish_args(finish))
        return bool(int(done))

    async def finish_many(self, finishes: Sequence[Finish]) -> list[bool | Exception]:
        """One EVALSHA recording every outcome, each as ``finish()`` would (fenced per
        run). On a Cluster, one ``finish()`` call per run (sent concurrently)."""
        if self.store.cluster:
            return await Backend.finish_many(self, finishes)
        if not finishes:
            return []
        keys: list[str] = []
        args: list[str] = []
        for finish in finishes:
            keys += self._run_keys(finish.name)
            args += [str(a) for a in finish_args(finish)]
        done = await self.store.script("finish_many", keys, [
            len(finishes), json.dumps(args, ensure_ascii=False)])
        return [bool(int(d)) for d in done]

    async def unfinished(self, names: Sequence[str]) -> list[RunState]:
        """Runs of these jobs still marked running."""
        if not names:
            return []
        groups = [[n] for n in names] if self.store.cluster else [list(names)]
        parts = await asyncio.gather(*(self._unfinished(group) for group in groups))
        return [state for part in parts for state in part]

    async def _unfinished(self, names: Sequence[str]) -> list[RunState]:
        keys: list[str] = []
        for name in names:
            k = self.store.keys(name)
            keys += [k.runs, k.active]
        now, rows = await self.store.script("read", keys, ["unfinished"])
        states = readable(
            rows, lambda row: run_state(names[int(row[0]) - 1], int(text(row[1])), row[2],
                                        int(now)),
            f"{self.store.kind} at {self.store.where}, runs hash",
            lambda row: f"job {names[int(row[0]) - 1]!r} slot {text(row[1])} = {row[2]!r}")
        return [state for state in states if state.running]

    async def watch(self, notify: Callable[[Wakeup], None]) -> None:
        """``SUBSCRIBE <prefix>wake`` on a dedicated connection and deliver wake-ups
        (hand-overs published by the release script, trigger requests, control
        changes) until cancelled;
        reconnects by itself. A sync client passed in has no asyncio pub/sub: returns at
        once and the engine polls."""
        await self.store.connect()
        if not self.store.can_subscribe:
            return
        await keep_listening(f"{self.name} at {self.store.where}", self._messages, notify)

    async def _messages(self) -> AsyncGenerator[str | bytes | None, None]:
        client = self.store.subscriber()
        if client is None:
            return
        pubsub = client.pubsub()
        try:
            await pubsub.subscribe(self.store.wake_channel)
            # read the confirmation: "up" means the server now delivers to us
            reply = await pubsub.get_message(timeout=5.0)
            if reply is None or reply.get("type") != "subscribe":
                raise StoreError(f"{self.name} at {self.store.where}: no SUBSCRIBE reply")
            yield None
            while True:
                message = await pubsub.get_message(ignore_subscribe_messages=True,
                                                   timeout=None)
                if message is not None and message.get("type") == "message":
                    yield message["data"]
        finally:
            try:
                await pubsub.aclose()
            finally:
                await client.aclose()


class ValkeyBackend(RedisBackend):
    """Valkey as the store: the same scripts and strategies as
    [`RedisBackend`][anarchon.backends.redis.RedisBackend]
    (``idmp`` excepted: Valkey has no ``XADD IDMP``)."""

    kind: ClassVar[Kind] = "valkey"

    def __init__(self, valkey: object = "redis://localhost:6379", *,
                 strategy: str = "lease", prefix: str = "cron:",
                 cluster: bool | None = None, **options: Any) -> None:
        super().__init__(valkey, strategy=strategy, prefix=prefix, cluster=cluster, **options)
