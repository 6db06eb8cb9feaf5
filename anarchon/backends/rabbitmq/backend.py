"""RabbitMQ (claim-only): a per-slot gate queue decides the winner by publisher confirms.

Each slot ``(job, slot)`` has a gate queue ``<prefix>gate.<job>.<slot>`` declared as a
durable **classic** queue with ``x-max-length: 1``, ``x-overflow: reject-publish`` and
``x-expires: slot_ttl``. Every contender declares it (declaring is idempotent and renews
the expiry) and publishes one persistent message to it with ``mandatory=True`` on a
confirm channel:

* ``basic.ack`` -> the message is the gate's one message: this instance won;
* ``basic.nack`` -> the gate was full: another instance won (``taken``);
* ``basic.return`` -> the gate was missing (deleted between declare and publish). The
  broker still acks an unroutable message, so a return is *never* a win: the claim raises
  [`StoreError`][anarchon.errors.StoreError] and the engine emits ``error`` and skips;
* no answer (connection dropped, timeout) -> the slot is skipped with ``StoreError``:
  the outcome is unknown and a gate is never read (reading would empty it).

Nothing consumes a gate: only *ready* messages count toward ``x-max-length``. Quorum
queues can overshoot the limit, so the queue type is always ``classic`` and an existing
gate of another type fails the declaration. Gates disappear ``slot_ttl`` after their last
declaration, so the broker holds about ``slot_ttl / interval`` gates per job. AMQP has no
server clock: lateness is judged on this instance's (NTP-synchronised) clock.

History is a per-job durable classic queue ``<prefix>history.<job>`` of JSON messages
(one per attempt start and one per end, see ``.records``). It is read with
``basic.get`` without acknowledging, then the channel is closed so every message is
requeued in place; after each finish the oldest messages beyond ``2 * history_size`` are
removed from the head. A reader holding the messages for its few milliseconds can make a
concurrent trim remove a newer record instead: history is best-effort, claims are not.
Known jobs live in ``<prefix>jobs`` (one message per job, bounded by ``x-max-length``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import secrets
import time
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

from ...durations import DurationLike, parse_duration, to_ms
from ...engine.aio import within
from ...errors import IncompatibleStoreError, StoreError
from ...history import RunRecord, RunStatus
from ...jobs.name_checks import check_broker_job_name
from ..base import ClaimBackend, ClaimRequest, ClaimResult, Finish, JobSpec
from ..broker_records import Entry, Remembered, merge, scheduled_key
from ..capabilities import CountedHistory
from ..frameworks import stored_kind, stored_spec
from ..urls import redact, split_options

logger = logging.getLogger("anarchon")

_INSTALL = 'RabbitMQBackend needs aio-pika: pip install "anarchon[rabbitmq]"'
_PREFIX = re.compile(r"[A-Za-z0-9._:-]{0,100}")
_MAX_QUEUE_NAME = 255
_SLOT_DIGITS = 20
_JOBS_MAX = 10_000
_MIN_VERSION = (3, 9)
_OPTIONS = ("prefix", "slot_ttl", "timeout")


def _driver() -> Any:
    try:
        import aio_pika
    except ImportError as exc:  # pragma: no cover - exercised without the extra
        raise ImportError(_INSTALL) from exc
    return aio_pika


class RabbitMQBackend(CountedHistory, ClaimBackend):
    """Claim-only backend on RabbitMQ 3.9+ (``pip install "anarchon[rabbitmq]"``).

    ``url`` is an AMQP URL (``amqp://guest:guest@localhost/``) or an aio-pika connection
    the application already has (never closed here). ``prefix`` namespaces every queue;
    ``slot_ttl`` is how long a slot's gate (and so the claim) is remembered: jobs need
    ``jitter + max_late < slot_ttl``. ``timeout`` bounds each broker round trip.
    """

    name = "rabbitmq"

    def __init__(self, url: Any = "amqp://guest:guest@localhost/", *, connection: Any = None,
                 prefix: str = "cron.", slot_ttl: DurationLike = "5m",
                 timeout: DurationLike = "10s") -> None:
        driver = _driver()
        if connection is not None:
            url = connection
        if isinstance(url, str):
            if urlsplit(url).scheme not in ("amqp", "amqps"):
                raise ValueError(f"RabbitMQBackend url must start with amqp:// or amqps://, "
                                 f"got {redact(url)!r}")
            self._url: str | None = url
            self._user_connection: Any = None
        elif isinstance(url, driver.abc.AbstractConnection):
            self._url, self._user_connection = None, url
        else:
            raise TypeError("RabbitMQBackend needs an amqp:// URL or an aio-pika connection, "
                            f"got {type(url).__name__}")
        if not isinstance(prefix, str) or not _PREFIX.fullmatch(prefix):
            raise ValueError(f"invalid prefix {prefix!r}: use up to 100 letters, digits, "
                             "'.', '_', ':' and '-'")
        if prefix.startswith("amq."):
            raise ValueError(f"invalid prefix {prefix!r}: queue names starting with 'amq.' "
                             "are reserved by RabbitMQ")
        self.prefix = prefix
        self.slot_ttl = parse_duration(slot_ttl, option="slot_ttl")
        if self.slot_ttl < 1:
            raise ValueError(f"slot_ttl must be at least 1s, got {slot_ttl!r}")
        self.timeout = parse_duration(timeout, option="timeout")
        if self.timeout <= 0:
            raise ValueError(f"timeout must be positive, got {timeout!r}")
        self._connection: Any = None
        self._confirm: Any = None
        self._lock = asyncio.Lock()
        self._won = Remembered()
        self._histories: set[str] = set()

    @classmethod
    def from_url(cls, url: str, **options: Any) -> RabbitMQBackend:
        """``amqp://user:pass@host:5672/vhost?prefix=cron.&slot_ttl=5m`` (keyword options
        override query parameters; other query parameters go to aio-pika)."""
        plain, ours = split_options(url, _OPTIONS)
        return cls(plain, **{**ours, **options})

    def __repr__(self) -> str:
        where = redact(self._url) if self._url else "user connection"
        return f"<RabbitMQBackend {where} prefix={self.prefix!r}>"

    # -- names -----------------------------------------------------------------------------

    def gate_queue(self, name: str, slot: int) -> str:
        """The gate queue of one slot."""
        return f"{self.prefix}gate.{name}.{slot}"

    def history_queue(self, name: str) -> str:
        """The queue holding a job's attempt records."""
        return f"{self.prefix}history.{name}"

    @property
    def jobs_queue(self) -> str:
        return f"{self.prefix}jobs"

    def check_job(self, name: str, jitter: float, max_late: float) -> None:
        """Names must fit queue names; the gate must outlive every claim of its slot."""
        check_broker_job_name(name, self.name)
        longest = len(self.gate_queue(name, 0)) - 1 + _SLOT_DIGITS
        if longest > _MAX_QUEUE_NAME:
            raise ValueError(f"job name {name!r} is too long for backend {self.name}: with "
                             f"prefix {self.prefix!r} its queue names exceed "
                             f"{_MAX_QUEUE_NAME} bytes")
        if jitter + max_late >= self.slot_ttl:
            raise ValueError(f"job {name!r}: jitter + max_late ({jitter + max_late:g}s) must be "
                             f"shorter than the {self.name} slot_ttl ({self.slot_ttl:g}s)")

    # -- connection ------------------------------------------------------------------------

    async def open(self) -> None:
        """Connect and check the broker (RabbitMQ 3.9+)."""
        await self._channel()
        version = _server_version(self._connection)
        if version is not None and version < _MIN_VERSION:
            raise IncompatibleStoreError(
                f"RabbitMQBackend needs RabbitMQ {'.'.join(map(str, _MIN_VERSION))}+, "
                f"the broker is {'.'.join(map(str, version))}")

    async def close(self) -> None:
        """Close channels, and the connection unless the application passed it in."""
        confirm, self._confirm = self._confirm, None
        if confirm is not None and not confirm.is_closed:
            await _quietly(confirm.close())
        connection, self._connection = self._connection, None
        if connection is not None and self._user_connection is None and not connection.is_closed:
            await _quietly(connection.close())

    async def _connect(self) -> Any:
        if self._user_connection is not None:
            if self._user_connection.is_closed:
                raise StoreError("the aio-pika connection passed to RabbitMQBackend is closed")
            return self._user_connection
        if self._connection is not None and not self._connection.is_closed:
            return self._connection
        aio_pika = _driver()
        try:
            self._connection = await within(aio_pika.connect(self._url),
                                                      self.timeout)
        except Exception as exc:
            raise StoreError(f"cannot connect to RabbitMQ at {redact(self._url)}: {exc}") from exc
        return self._connection

    async def _channel(self) -> Any:
        """The shared confirm channel (reopened after a channel or connection error)."""
        async with self._lock:
            if self._confirm is None or self._confirm.is_closed:
                self._connection = await self._connect()
                try:
                    self._confirm = await self._connection.channel(
                        publisher_confirms=True, on_return_raises=True)
                except Exception as exc:
                    raise StoreError(f"cannot open a RabbitMQ channel: {exc}") from exc
            return self._confirm

    async def _scratch(self) -> Any:
        """A short-lived channel for reads (closing it requeues what it holds)."""
        await self._channel()
        try:
            return await self._connection.channel(publisher_confirms=False)
        except Exception as exc:
            raise StoreError(f"cannot open a RabbitMQ channel: {exc}") from exc

    # -- claims ----------------------------------------------------------------------------

    async def claim(self, request: ClaimRequest) -> ClaimResult:
        """Declare the slot's gate and publish into it; the broker's confirm decides."""
        now = _now_ms()
        if request.reason != "scheduled":
            return ClaimResult("taken", 0, now)  # needs a lease; the engine never asks
        if now > request.slot + request.max_late_ms:
            return ClaimResult("late", 0, now)
        aio_pika = _driver()
        channel = await self._channel()
        gate = self.gate_queue(request.name, request.slot)
        await self._declare_gate(channel, gate)
        message = aio_pika.Message(
            request.owner.encode(), delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
            message_id=f"{request.name}:{request.slot}",
            headers={"anarchon_owner": request.owner},
        )
        try:
            await channel.default_exchange.publish(message, routing_key=gate, mandatory=True,
                                                   timeout=self.timeout)
        except aio_pika.exceptions.PublishError as exc:
            raise StoreError(f"gate {gate!r} was missing when publishing (returned "
                             "unroutable); not a win, slot skipped") from exc
        except aio_pika.exceptions.DeliveryError:
            return ClaimResult("taken", 0, now)  # nack: the gate already holds a message
        except Exception as exc:
            raise StoreError(f"claim of {request.name!r} slot {request.slot}: publish "
                             f"confirmation lost ({type(exc).__name__}: {exc}); slot "
                             "skipped to avoid a duplicate") from exc
        self._won.add(request.name, request.slot, request.owner, now)
        key = scheduled_key(request.slot, 1)
        await self._append(Entry(key, request.name, request.slot, request.owner, False, 1,
                                 "scheduled", "running", now))
        return ClaimResult("won", 1, now)

    async def _declare_gate(self, channel: Any, gate: str) -> None:
        """Declare (or renew) a slot's gate: classic, one message, reject the rest."""
        aio_pika = _driver()
        try:
            await channel.declare_queue(gate, durable=True, timeout=self.timeout, arguments={
                "x-queue-type": "classic", "x-max-length": 1,
                "x-overflow": "reject-publish", "x-expires": to_ms(self.slot_ttl),
            })
        except aio_pika.exceptions.ChannelPreconditionFailed as exc:
            raise IncompatibleStoreError(
                f"gate queue {gate!r} exists with other arguments (a quorum queue or another "
                f"slot_ttl?): {exc}") from exc
        except Exception as exc:
            raise StoreError(f"declaring gate {gate!r} failed: {exc}") from exc

    async def confirm(self, request: ClaimRequest) -> int:
        """1 if this process saw the broker's ack for the claim; a gate is never read."""
        return 1 if self._won.owner(request.name, request.slot) == request.owner else 0

    # -- history ---------------------------------------------------------------------------

    async def _declare_history(self, channel: Any, name: str) -> Any:
        return await channel.declare_queue(self.history_queue(name), durable=True,
                                           arguments={"x-queue-type": "classic"},
                                           timeout=self.timeout)

    async def _append(self, entry: Entry) -> None:
        aio_pika = _driver()
        channel = await self._channel()
        queue = self.history_queue(entry.name)
        try:
            if queue not in self._histories:
                await self._declare_history(channel, entry.name)
                self._histories.add(queue)
            await channel.default_exchange.publish(
                aio_pika.Message(entry.encode(), delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
                                 content_type="application/json"),
                routing_key=queue, mandatory=True, timeout=self.timeout)
        except Exception as exc:
            self._histories.discard(queue)
            raise StoreError(f"writing history of {entry.name!r} failed: {exc}") from exc

    async def _trim(self, name: str, history_size: int) -> None:
        """Drop the oldest messages beyond ``2 * history_size`` (a start and an end each)."""
        limit = 2 * history_size
        channel = await self._channel()
        try:
            while True:
                queue = await channel.declare_queue(self.history_queue(name), passive=True,
                                                    timeout=self.timeout)
                count = queue.declaration_result.message_count
                if count <= limit:
                    return
                for _ in range(count - limit):
                    message = await queue.get(no_ack=True, fail=False, timeout=self.timeout)
                    if message is None:
                        return
        except Exception as exc:
            self._histories.discard(self.history_queue(name))
            raise StoreError(f"trimming history of {name!r} failed: {exc}") from exc

    async def _read(self, queue_name: str) -> list[bytes]:
        """Every message of a queue, oldest first, left in the queue (requeued on close)."""
        aio_pika = _driver()
        channel = await self._scratch()
        bodies: list[bytes] = []
        try:
            try:
                queue = await channel.declare_queue(queue_name, passive=True,
                                                    timeout=self.timeout)
            except aio_pika.exceptions.ChannelNotFoundEntity:
                return []
            count = queue.declaration_result.message_count
            for _ in range(count):
                message = await queue.get(no_ack=False, fail=False, timeout=self.timeout)
                if message is None:
                    break
                bodies.append(message.body)
        except Exception as exc:
            raise StoreError(f"reading {queue_name!r} failed: {exc}") from exc
        finally:
            await _quietly(channel.close())
        return bodies

    async def finish(self, finish: Finish) -> bool:
        """Record the outcome (only attempt 1 exists; a foreign owner is refused)."""
        known = self._won.owner(finish.name, finish.slot)
        if finish.attempt != 1 or (known is not None and known != finish.owner):
            return False
        started = self._won.started(finish.name, finish.slot) or finish.slot
        entry = Entry(scheduled_key(finish.slot, 1), finish.name, finish.slot, finish.owner,
                      False, 1, "scheduled", "running", started)
        await self._append(entry.finished(finish.status, finish.error, _now_ms()))
        await self._trim(finish.name, finish.history_size)
        return True

    async def start_manual(self, name: str, owner: str, started_ms: int) -> str:
        key = f"m:{started_ms}:{secrets.token_hex(4)}"
        entry = Entry(key, name, started_ms, owner, True, 1, "manual", "running", started_ms)
        await self._append(entry)
        return json.dumps([name, key, owner, started_ms])

    async def finish_manual(self, token: str, status: RunStatus, error: str | None,
                            history_size: int, history_ttl_ms: int | None) -> None:
        name, key, owner, started = json.loads(token)
        entry = Entry(key, name, started, owner, True, 1, "manual", "running", started)
        await self._append(entry.finished(status, error, _now_ms()))
        await self._trim(name, history_size)

    async def _entries(self, name: str) -> list[Entry]:
        entries = (Entry.decode(body) for body in await self._read(self.history_queue(name)))
        return [e for e in entries if e is not None]

    async def history(self, name: str, count: int) -> list[RunRecord]:
        return merge(await self._entries(name), count)

    # -- jobs ------------------------------------------------------------------------------

    async def register(self, jobs: Sequence[JobSpec]) -> None:
        """Add jobs not yet listed in ``<prefix>jobs``; declare their history queues."""
        if not jobs:
            return
        aio_pika = _driver()
        channel = await self._channel()
        try:
            await channel.declare_queue(self.jobs_queue, durable=True, timeout=self.timeout,
                                        arguments={"x-queue-type": "classic",
                                                   "x-max-length": _JOBS_MAX})
            known = set(await self.known_jobs())
            for spec in jobs:
                await self._declare_history(channel, spec.name)
                self._histories.add(self.history_queue(spec.name))
                if spec in known:
                    continue
                body = json.dumps({"n": spec.name, "k": stored_kind(spec), "s": spec.schedule,
                                   "t": _now_ms()}).encode()
                await channel.default_exchange.publish(
                    aio_pika.Message(body, delivery_mode=aio_pika.DeliveryMode.PERSISTENT),
                    routing_key=self.jobs_queue, mandatory=True, timeout=self.timeout)
        except StoreError:
            raise
        except Exception as exc:
            raise StoreError(f"registering jobs failed: {exc}") from exc

    async def known_jobs(self) -> list[JobSpec]:
        """Jobs any instance registered with this prefix (the newest entry per name)."""
        latest: dict[str, tuple[int, JobSpec]] = {}
        for body in await self._read(self.jobs_queue):
            try:
                raw = json.loads(body)
                spec = stored_spec(str(raw["n"]), str(raw["k"]), str(raw["s"]))
                seen = int(raw["t"])
            except (ValueError, KeyError, TypeError):
                continue
            if spec.name not in latest or latest[spec.name][0] <= seen:
                latest[spec.name] = (seen, spec)
        return [latest[name][1] for name in sorted(latest)]


def _now_ms() -> int:
    return int(time.time() * 1000)


def _server_version(connection: Any) -> tuple[int, ...] | None:
    try:
        raw = connection.transport.connection.server_properties.get("version")
        text = raw.decode() if isinstance(raw, bytes) else str(raw)
        return tuple(int(p) for p in re.findall(r"\d+", text)[:2])
    except Exception:
        return None


async def _quietly(awaitable: Any) -> None:
    try:
        await awaitable
    except Exception as exc:
        logger.debug("ignored while closing a RabbitMQ channel: %s", exc)


__all__ = ["RabbitMQBackend"]
