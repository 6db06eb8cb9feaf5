"""Claim-only comparison strategies for Redis/Valkey: one winner per slot, no leases (lab
code: ``anarchon.backends.redis.comparison_backend()`` reaches them when the lab is
installed).

* ``stream-id``: ``XADD <job stream> <slot>-1``; Redis refuses an id not greater than the
  stream's last one ("equal or smaller"), which is how a loser finds out. The last id
  never goes backwards, so an older slot (a late claim after a newer one) always loses.
  Lateness is judged from ``TIME`` sent in the same round trip; a late claim still adds
  its entry, so nobody runs that slot.
* ``script``: a Lua script adds the slot only if it was not claimed within ``window``
  (server clock for lateness). Jobs need ``jitter + max_late < window``.
* ``idmp`` (Redis 8.6+, not Valkey): ``XADD ... IDMP``. A duplicate returns the original
  entry's id without an error, so the winner is decided by reading the entry back and
  comparing its owner field. Redis remembers an idempotent id for ``duration`` (default
  300 s; jobs need ``jitter + max_late < duration``), at most ``max_size`` per stream.
  The stream's IDMP settings are set once, when the stream is first created.

Attempt records are kept like the lease strategy's (``history_size``, ``history_ttl``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from anarchon.backends.base import ClaimBackend, ClaimRequest, ClaimResult, Finish, JobSpec
from anarchon.backends.redis.connection import Kind, RedisStore, check_driver, text
from anarchon.backends.redis.records import (
    RedisHistory,
    finish_record,
    known_jobs,
    register_jobs,
)
from anarchon.durations import parse_duration
from anarchon.errors import IncompatibleStoreError, StoreError

_STREAM_MAXLEN = "1000"


class RedisClaimBackend(RedisHistory, ClaimBackend):
    """Shared parts of the claim-only strategies (history, jobs, manual runs)."""

    strategy = ""

    def __init__(self, kind: Kind, client: object, *, prefix: str = "cron:",
                 cluster: bool | None = None) -> None:
        check_driver(kind, client)
        self.kind = kind
        self.store = RedisStore(kind, client, prefix, cluster)
        self.name = f"{kind}:{self.strategy}"

    def __repr__(self) -> str:
        return (f"<{type(self).__name__} {self.name} {self.store.where} "
                f"prefix={self.store.prefix!r}>")

    async def open(self) -> None:
        await self.store.connect()
        self.store.require_version((5, 0), self.name)

    async def close(self) -> None:
        await self.store.close()

    async def register(self, jobs: Sequence[JobSpec]) -> None:
        await register_jobs(self.store, jobs)

    async def known_jobs(self) -> list[JobSpec]:
        return await known_jobs(self.store)

    async def _record_start(self, name: str, slot: int, owner: str) -> None:
        k = self.store.keys(name)
        await self.store.script("manual", [k.att, k.hist],
                                ["start", f"{slot}:1", owner, slot, 1, "scheduled"])

    async def finish(self, finish: Finish) -> bool:
        """Record the outcome; ignored unless this owner's attempt is still running."""
        return await finish_record(self.store, finish.name, f"{finish.slot}:{finish.attempt}",
                                   finish.owner, finish.status, finish.error,
                                   finish.history_size, finish.history_ttl_ms)

    async def _time_and(self, command: Sequence[object]) -> tuple[int, Any]:
        """``TIME`` and one command in one round trip; the command's error is returned."""
        now, reply = await self.store.pipeline([("TIME",), command])
        if isinstance(now, Exception):
            raise self.store.translate(now)
        return _time_ms(now), reply

    @staticmethod
    def _not_scheduled(request: ClaimRequest) -> ClaimResult | None:
        if request.reason != "scheduled":
            # leases are needed for catch-up and takeover; the engine never asks for them
            return ClaimResult("taken", 0, 0)
        return None


class StreamIdBackend(RedisClaimBackend):
    """``XADD`` with the slot as the entry id."""

    strategy = "stream-id"

    async def claim(self, request: ClaimRequest) -> ClaimResult:
        refused = self._not_scheduled(request)
        if refused:
            return refused
        k = self.store.keys(request.name)
        now, reply = await self._time_and(("XADD", k.stream, "MAXLEN", "~", _STREAM_MAXLEN,
                                           f"{request.slot}-1", "owner", request.owner))
        if isinstance(reply, Exception):
            if "equal or smaller" in str(reply):
                return ClaimResult("taken", 0, now)
            raise self.store.translate(reply)
        if now > request.slot + request.max_late_ms:
            return ClaimResult("late", 0, now)
        await self._record_start(request.name, request.slot, request.owner)
        return ClaimResult("won", 1, now)

    async def confirm(self, request: ClaimRequest) -> int:
        k = self.store.keys(request.name)
        entry_id = f"{request.slot}-1"
        entries = await self.store.command("XRANGE", k.stream, entry_id, entry_id)
        return 1 if entries and _owner(entries[0]) == request.owner else 0


class ScriptBackend(RedisClaimBackend):
    """A Lua check-then-add, remembering claimed slots for ``window``."""

    strategy = "script"

    def __init__(self, kind: Kind, client: object, *, prefix: str = "cron:",
                 cluster: bool | None = None, window: object = 3600) -> None:
        super().__init__(kind, client, prefix=prefix, cluster=cluster)
        self.window_ms = int(parse_duration(window, option="window") * 1000)
        if self.window_ms <= 0:
            raise ValueError(f"window must be positive, got {window!r}")

    def check_job(self, name: str, jitter: float, max_late: float) -> None:
        if (jitter + max_late) * 1000 >= self.window_ms:
            raise ValueError(f"job {name!r}: jitter + max_late ({jitter + max_late:g}s) must "
                             f"be shorter than the {self.name} window "
                             f"({self.window_ms / 1000:g}s)")

    async def claim(self, request: ClaimRequest) -> ClaimResult:
        refused = self._not_scheduled(request)
        if refused:
            return refused
        k = self.store.keys(request.name)
        reply = await self.store.script(
            "claim_script", [k.seen, k.stream, k.att, k.hist],
            [request.slot, request.owner, request.max_late_ms, self.window_ms])
        return ClaimResult(text(reply[0]), int(reply[1]), int(reply[2]))  # type: ignore[arg-type]

    async def confirm(self, request: ClaimRequest) -> int:
        k = self.store.keys(request.name)
        raw = await self.store.command("HGET", k.att, f"{request.slot}:1")
        return 1 if raw and json.loads(text(raw)).get("inst") == request.owner else 0


class IdmpBackend(RedisClaimBackend):
    """``XADD ... IDMP`` (Redis 8.6+): the first entry per slot wins."""

    strategy = "idmp"

    def __init__(self, kind: Kind, client: object, *, prefix: str = "cron:",
                 cluster: bool | None = None, duration: object = 300,
                 max_size: int = 100) -> None:
        if kind == "valkey":
            raise TypeError("strategy 'idmp' is not available on Valkey (no XADD IDMP); "
                            "use 'lease', 'script' or 'stream-id'")
        super().__init__(kind, client, prefix=prefix, cluster=cluster)
        seconds = parse_duration(duration, option="duration")
        if not 1 <= seconds <= 86400:
            raise ValueError(f"duration must be between 1s and 1d, got {duration!r}")
        if isinstance(max_size, bool) or not isinstance(max_size, int):
            raise TypeError(f"max_size must be an int, got {max_size!r}")
        if not 1 <= max_size <= 10000:
            raise ValueError(f"max_size must be between 1 and 10000, got {max_size!r}")
        self.duration_s = int(seconds)
        self.max_size = max_size

    def check_job(self, name: str, jitter: float, max_late: float) -> None:
        if jitter + max_late >= self.duration_s:
            raise ValueError(f"job {name!r}: jitter + max_late ({jitter + max_late:g}s) must "
                             f"be shorter than the idmp duration ({self.duration_s}s)")

    async def open(self) -> None:
        """Fail clearly unless the server has ``XADD IDMP`` (Redis 8.6+)."""
        await self.store.connect()
        if self.store.server_name != "redis":
            raise IncompatibleStoreError(
                f"strategy 'idmp' needs Redis 8.6+ (XADD IDMP); the server at "
                f"{self.store.where} is {self.store.server_text}, which has no XADD IDMP")
        self.store.require_version((8, 6), "strategy 'idmp' (XADD IDMP)")

    async def register(self, jobs: Sequence[JobSpec]) -> None:
        await super().register(jobs)
        for job in jobs:
            stream = self.store.keys(job.name).stream
            # XCFGSET clears the idempotency map when values change: only on a new stream
            if not await self.store.command("EXISTS", stream):
                await self.store.command("XADD", stream, "*", "init", "1")
                await self.store.command("XCFGSET", stream, "IDMP-DURATION",
                                         str(self.duration_s), "IDMP-MAXSIZE",
                                         str(self.max_size))

    async def claim(self, request: ClaimRequest) -> ClaimResult:
        refused = self._not_scheduled(request)
        if refused:
            return refused
        k = self.store.keys(request.name)
        now, reply = await self._time_and(
            ("XADD", k.stream, "IDMP", "anarchon", str(request.slot), "*",
             "slot", str(request.slot), "owner", request.owner))
        if isinstance(reply, Exception):
            raise self.store.translate(reply)
        entries = await self.store.command("XRANGE", k.stream, reply, reply)
        if not entries or _owner(entries[0]) != request.owner:
            return ClaimResult("taken", 0, now)
        if now > request.slot + request.max_late_ms:
            return ClaimResult("late", 0, now)
        await self._record_start(request.name, request.slot, request.owner)
        return ClaimResult("won", 1, now)


STRATEGY_CLASSES: dict[str, type[RedisClaimBackend]] = {
    "stream-id": StreamIdBackend, "script": ScriptBackend, "idmp": IdmpBackend,
}


def comparison_backend(strategy: str, client: object = "redis://localhost:6379", *,
                       kind: Kind = "redis", **options: Any) -> RedisClaimBackend:
    """Build the claim-only comparison backend for ``strategy`` (``"stream-id"``,
    ``"script"`` or ``"idmp"``) on ``client`` (a URL, connection kwargs or your client);
    ``kind="valkey"`` for Valkey. Options: ``prefix``, ``cluster``, ``window``
    (``script``), ``duration`` and ``max_size`` (``idmp``); unknown ones raise
    ``TypeError``, an unknown strategy ``ValueError``."""
    cls = STRATEGY_CLASSES.get(strategy)
    if cls is None:
        raise ValueError(f"unknown {kind} strategy {strategy!r}; use one of: lease, "
                         + ", ".join(STRATEGY_CLASSES))
    try:
        return cls(kind, client, **options)
    except TypeError as exc:
        if "unexpected keyword" in str(exc):
            bad = sorted(set(options) - {"prefix", "cluster", "window", "duration",
                                         "max_size"} or options)
            raise TypeError(f"option(s) {', '.join(bad)} not supported by "
                            f"{kind}:{strategy}") from None
        raise


def _time_ms(value: Any) -> int:
    seconds, micros = (value[0], value[1])
    return int(text(seconds)) * 1000 + int(text(micros)) // 1000


def _owner(entry: Any) -> str | None:
    fields = entry[1]
    items: Any = (fields.items() if isinstance(fields, dict)
                  else zip(fields[::2], fields[1::2], strict=True))
    for key, value in items:
        if text(key) == "owner":
            return text(value)
    return None


__all__ = ["STRATEGY_CLASSES", "IdmpBackend", "RedisClaimBackend", "ScriptBackend",
           "StoreError", "StreamIdBackend", "claim_backend", "comparison_backend"]


def claim_backend(kind: Kind, client: object, strategy: str, **options: Any) -> ClaimBackend:
    """The former name of ``comparison_backend()`` (kept for this release)."""
    return comparison_backend(strategy, client, kind=kind, **options)
