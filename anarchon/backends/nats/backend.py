"""NATS JetStream (claim-only): de-duplication on ``Nats-Msg-Id: <job>:<slot>`` picks one
winner per slot.

One stream (``stream``, default ``CRON``) takes the subjects ``<prefix>run.<job>`` (the
attempt records of a job) and ``<prefix>job.<job>`` (what ``jobs()`` lists). A claim is
the attempt's first record: a JetStream publish to ``<prefix>run.<job>`` carrying
``Nats-Msg-Id: <job>:<slot>`` and an ``Anarchon-Owner`` header. The stream stores the
first message per id seen within its ``duplicate_window``; every later publisher gets
``PubAck.duplicate`` and lost.

* A publish whose ack is lost (timeout, connection dropped) is retried once with the same
  id. A retry answered ``duplicate`` may be our own first publish: the stored message is
  read back and its owner header compared before deciding.
* If the retry fails too, the claim raises [`StoreError`][anarchon.errors.StoreError] (the
  engine emits ``error``); the engine's ``confirm`` then reads the stored message back and
  runs the slot only if it carries this instance's owner — otherwise the slot is skipped.
* The id is remembered only for ``duplicate_window``: jobs need
  ``jitter + max_late < duplicate_window`` (checked when added), and ``start()`` refuses
  an existing stream whose window is shorter (it is never altered silently).
* Lateness is judged on this instance's clock (JetStream has no claim-time clock check).

History is kept by count with the stream's ``max_msgs_per_subject``: one limit for all
jobs of the stream, ``2 * history_size`` messages (a start and an end per attempt), where
``history_size`` is the largest of the backend's and any job's (raised when a job with a
larger one finishes; never lowered).
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

from ...durations import DurationLike, parse_duration
from ...errors import IncompatibleStoreError, StoreError
from ...history import RunRecord, RunStatus
from ...jobs.name_checks import check_broker_job_name
from ..base import ClaimBackend, ClaimRequest, ClaimResult, Finish, JobSpec
from ..broker_records import Entry, Remembered, merge, scheduled_key
from ..capabilities import CountedHistory
from ..decoding import readable
from ..frameworks import stored_kind, stored_spec
from ..urls import redact, split_options
from .stream import connect, create_stream, driver, read_stream, stream_config

logger = logging.getLogger("anarchon")

_STREAM = re.compile(r"[A-Za-z0-9_-]{1,64}")
_PREFIX = re.compile(r"([A-Za-z0-9_-]+\.)*[A-Za-z0-9_-]*")
_OWNER = "Anarchon-Owner"
_MSG_ID = "Nats-Msg-Id"
_OPTIONS = ("stream", "prefix", "duplicate_window", "history_size", "replicas", "timeout")


_driver = driver


class NatsBackend(CountedHistory, ClaimBackend):
    """Claim-only backend on NATS JetStream (``pip install "anarchon[nats]"``).

    ``servers`` is a URL, a list of URLs, or a connected nats-py client (never closed
    here). ``stream`` and ``prefix`` namespace the data; ``duplicate_window`` is how long a
    claim is remembered; ``history_size`` the records kept per job (stream-wide);
    ``replicas`` the stream's replicas when it is created (3 in a NATS cluster).
    """

    name = "nats"

    def __init__(self, servers: Any = "nats://localhost:4222", *, connection: Any = None,
                 stream: str = "CRON", prefix: str = "cron.",
                 duplicate_window: DurationLike = "5m", history_size: int = 1000,
                 replicas: int = 1, timeout: DurationLike = "5s") -> None:
        nats = _driver()
        if connection is not None:
            servers = connection
        if isinstance(servers, str):
            servers = [s.strip() for s in servers.split(",") if s.strip()]
        if isinstance(servers, list) and servers and all(isinstance(s, str) for s in servers):
            self._servers: list[str] = servers
            self._user_client: Any = None
        elif isinstance(servers, nats.aio.client.Client):
            self._servers, self._user_client = [], servers
        else:
            raise TypeError("NatsBackend needs nats:// URL(s) or a nats-py client, got "
                            f"{type(servers).__name__}")
        if not isinstance(stream, str) or not _STREAM.fullmatch(stream):
            raise ValueError(f"invalid stream {stream!r}: use 1-64 letters, digits, '_', '-'")
        if not isinstance(prefix, str) or not _PREFIX.fullmatch(prefix):
            raise ValueError(f"invalid prefix {prefix!r}: use dot-separated tokens of "
                             "letters, digits, '_' and '-'")
        self.stream = stream
        self.prefix = prefix if prefix == "" or prefix.endswith(".") else prefix + "."
        self.duplicate_window = parse_duration(duplicate_window, option="duplicate_window")
        if self.duplicate_window < 1:
            raise ValueError(f"duplicate_window must be at least 1s, got {duplicate_window!r}")
        self.history_size = _count(history_size, "history_size")
        self.replicas = _count(replicas, "replicas")
        self.timeout = parse_duration(timeout, option="timeout")
        if self.timeout <= 0:
            raise ValueError(f"timeout must be positive, got {timeout!r}")
        self._client: Any = None
        self._js: Any = None
        self._per_subject = 0
        self._lock = asyncio.Lock()
        self._won = Remembered()

    @classmethod
    def from_url(cls, url: str, **options: Any) -> NatsBackend:
        """``nats://host:4222?stream=CRON&prefix=cron.&duplicate_window=5m`` (keyword
        options override query parameters)."""
        plain, query = split_options(url, _OPTIONS)
        ours: dict[str, Any] = dict(query)
        for key in ("history_size", "replicas"):
            if key in ours:
                if not ours[key].isdigit():
                    raise ValueError(f"{key} in the NATS URL must be a whole number, "
                                     f"got {ours[key]!r}")
                ours[key] = int(ours[key])
        return cls(plain, **{**ours, **options})

    def __repr__(self) -> str:
        where = ",".join(redact(s) for s in self._servers) or "user connection"
        return f"<NatsBackend {where} stream={self.stream!r} prefix={self.prefix!r}>"

    # -- names -----------------------------------------------------------------------------

    def run_subject(self, name: str) -> str:
        """The subject holding a job's attempt records (and its claims)."""
        return f"{self.prefix}run.{name}"

    def job_subject(self, name: str) -> str:
        return f"{self.prefix}job.{name}"

    @property
    def subjects(self) -> list[str]:
        return [f"{self.prefix}run.*", f"{self.prefix}job.*"]

    def check_job(self, name: str, jitter: float, max_late: float) -> None:
        """Names must be one subject token; the window must outlive every claim."""
        check_broker_job_name(name, self.name)
        if jitter + max_late >= self.duplicate_window:
            raise ValueError(f"job {name!r}: jitter + max_late ({jitter + max_late:g}s) must be "
                             f"shorter than the {self.name} duplicate_window "
                             f"({self.duplicate_window:g}s)")

    # -- connection and stream -------------------------------------------------------------

    async def open(self) -> None:
        """Connect, and check the stream if it exists; the first write creates it (see
        ``stream.py``: a read creates nothing)."""
        js = await self._jetstream()
        if self._per_subject == 0:
            info = await read_stream(js, self.stream)
            if info is not None:
                await self._check_stream(info.config)

    async def _ensure_stream(self) -> Any:
        """The JetStream context, with the stream created or checked (before a write)."""
        js = await self._jetstream()
        if self._per_subject != 0:
            return js
        info = await read_stream(js, self.stream)
        if info is not None:
            await self._check_stream(info.config)
            return js
        wanted = 2 * self.history_size
        await create_stream(js, stream_config(self.stream, self.subjects, wanted,
                                              self.duplicate_window, self.replicas),
                            self.prefix)
        self._per_subject = wanted
        return js

    async def _check_stream(self, config: Any) -> None:
        window = config.duplicate_window or 0
        if window + 1e-3 < self.duplicate_window:
            raise IncompatibleStoreError(
                f"JetStream stream {self.stream!r} has duplicate_window {window:g}s, shorter "
                f"than the configured {self.duplicate_window:g}s: a slot could be claimed twice. "
                f"Raise it (nats stream edit {self.stream} --dupe-window "
                f"{int(self.duplicate_window)}s) or configure duplicate_window<={window:g}s; "
                "anarchon never changes it")
        missing = [s for s in self.subjects if s not in (config.subjects or [])]
        if missing:
            raise IncompatibleStoreError(
                f"JetStream stream {self.stream!r} does not take subjects {missing}; use the "
                f"stream made for prefix {self.prefix!r} or another stream=")
        self._per_subject = config.max_msgs_per_subject or -1
        await self._ensure_history_size(self.history_size)

    async def _ensure_history_size(self, history_size: int) -> None:
        """Raise the stream's per-subject limit to ``2 * history_size`` (never lower it)."""
        wanted = 2 * history_size
        if self._per_subject < 0 or self._per_subject >= wanted:
            return
        js = await self._jetstream()
        try:
            info = await js.stream_info(self.stream)
            current = info.config.max_msgs_per_subject
            if 0 <= current < wanted:
                await js.update_stream(info.config.evolve(max_msgs_per_subject=wanted))
                logger.info("raised max_msgs_per_subject of stream %s to %d (history_size %d)",
                            self.stream, wanted, history_size)
                current = wanted
            self._per_subject = current
        except Exception as exc:
            raise StoreError(f"raising the history size of {self.stream!r} failed: {exc}") from exc

    async def close(self) -> None:
        """Close the connection unless the application passed it in."""
        client, self._client, self._js = self._client, None, None
        self._per_subject = 0  # checked again on the next connection
        if client is not None and self._user_client is None and not client.is_closed:
            try:
                await client.close()
            except Exception as exc:
                logger.debug("ignored while closing NATS: %s", exc)

    async def _jetstream(self) -> Any:
        async with self._lock:
            if self._js is not None and not self._client.is_closed:
                return self._js
            if self._user_client is not None:
                self._client = self._user_client
                if self._client.is_closed:
                    raise StoreError("the nats-py client passed to NatsBackend is closed")
            else:
                self._client = await connect(self._servers, self.timeout)
            self._js = self._client.jetstream(timeout=self.timeout)
            return self._js

    # -- claims ----------------------------------------------------------------------------

    async def claim(self, request: ClaimRequest) -> ClaimResult:
        """Publish the attempt's first record with ``Nats-Msg-Id: <job>:<slot>``."""
        now = _now_ms()
        if request.reason != "scheduled":
            return ClaimResult("taken", 0, now)  # needs a lease; the engine never asks
        if now > request.slot + request.max_late_ms:
            return ClaimResult("late", 0, now)
        entry = Entry(scheduled_key(request.slot, 1), request.name, request.slot,
                      request.owner, False, 1, "scheduled", "running", now)
        headers = {_MSG_ID: f"{request.name}:{request.slot}", _OWNER: request.owner}
        subject = self.run_subject(request.name)
        try:
            ack = await self._publish(subject, entry.encode(), headers)
        except StoreError as first:
            if _now_ms() > request.slot + request.max_late_ms:
                raise
            try:  # the ack may be lost, not the message: retry with the same id
                ack = await self._publish(subject, entry.encode(), headers)
            except StoreError as exc:
                raise StoreError(f"claim of {request.name!r} slot {request.slot}: publish "
                                 f"acknowledgement lost twice ({first}; {exc}); skipped "
                                 "unless the stored claim shows this instance") from exc
            if ack.duplicate and not await self._owns(request):
                return ClaimResult("taken", 0, now)
        else:
            if ack.duplicate:
                return ClaimResult("taken", 0, now)
        self._won.add(request.name, request.slot, request.owner, now)
        return ClaimResult("won", 1, now)

    async def confirm(self, request: ClaimRequest) -> int:
        """After a failed claim: 1 if the stored claim carries this owner, else 0."""
        if self._won.owner(request.name, request.slot) == request.owner:
            return 1
        if await self._owns(request):
            self._won.add(request.name, request.slot, request.owner, _now_ms())
            return 1
        return 0

    async def _owns(self, request: ClaimRequest) -> bool:
        """Read the stored claim of ``(job, slot)`` back and compare its owner header."""
        wanted = f"{request.name}:{request.slot}"
        for headers, _ in await self._read(self.run_subject(request.name)):
            if headers.get(_MSG_ID) == wanted:
                return headers.get(_OWNER) == request.owner
        return False

    async def _publish(self, subject: str, payload: bytes, headers: dict[str, str]) -> Any:
        js = await self._ensure_stream()
        try:
            return await js.publish(subject, payload, timeout=self.timeout,
                                    stream=self.stream, headers=dict(headers))
        except Exception as exc:
            raise StoreError(f"JetStream publish to {subject!r} failed: "
                             f"{type(exc).__name__}: {exc}") from exc

    # -- history ---------------------------------------------------------------------------

    async def _read(self, subject: str) -> list[tuple[dict[str, str], bytes]]:
        """Every stored message of ``subject``, oldest first, as ``(headers, data)``."""
        nats = _driver()
        js = await self._jetstream()
        try:
            info = await js.stream_info(self.stream, subjects_filter=subject)
            if not (info.state.subjects or {}).get(subject):
                return []
        except nats.js.errors.NotFoundError:
            return []  # no stream yet: nothing was written
        except Exception as exc:
            raise StoreError(f"reading {subject!r} failed: {exc}") from exc
        try:
            sub = await js.subscribe(subject, stream=self.stream, ordered_consumer=True,
                                     deliver_policy=nats.js.api.DeliverPolicy.ALL)
        except Exception as exc:
            raise StoreError(f"reading {subject!r} failed: {exc}") from exc
        out: list[tuple[dict[str, str], bytes]] = []
        try:
            while True:
                msg = await sub.next_msg(timeout=self.timeout)
                out.append((dict(msg.headers or {}), msg.data))
                if msg.metadata.num_pending == 0:
                    return out
        except Exception as exc:
            raise StoreError(f"reading {subject!r} failed: {exc}") from exc
        finally:
            try:
                await sub.unsubscribe()
            except Exception as exc:
                logger.debug("ignored while unsubscribing: %s", exc)

    async def _append(self, entry: Entry, msg_id: str) -> None:
        await self._publish(self.run_subject(entry.name), entry.encode(), {_MSG_ID: msg_id})

    async def finish(self, finish: Finish) -> bool:
        """Record the outcome (only attempt 1 exists; a foreign owner is refused)."""
        known = self._won.owner(finish.name, finish.slot)
        if finish.attempt != 1 or (known is not None and known != finish.owner):
            return False
        started = self._won.started(finish.name, finish.slot) or finish.slot
        entry = Entry(scheduled_key(finish.slot, 1), finish.name, finish.slot, finish.owner,
                      False, 1, "scheduled", "running", started)
        await self._ensure_history_size(finish.history_size)
        await self._append(entry.finished(finish.status, finish.error, _now_ms()),
                           f"{finish.name}:{finish.slot}:end")
        return True

    async def start_manual(self, name: str, owner: str, started_ms: int) -> str:
        key = f"m:{started_ms}:{secrets.token_hex(4)}"
        await self._append(Entry(key, name, started_ms, owner, True, 1, "manual", "running",
                                 started_ms), f"{name}:{key}")
        return json.dumps([name, key, owner, started_ms])

    async def finish_manual(self, token: str, status: RunStatus, error: str | None,
                            history_size: int, history_ttl_ms: int | None) -> None:
        name, key, owner, started = json.loads(token)
        entry = Entry(key, name, started, owner, True, 1, "manual", "running", started)
        await self._ensure_history_size(history_size)
        await self._append(entry.finished(status, error, _now_ms()), f"{name}:{key}:end")

    async def history(self, name: str, count: int) -> list[RunRecord]:
        entries = (Entry.decode(data) for _, data in await self._read(self.run_subject(name)))
        return merge([e for e in entries if e is not None], count)

    # -- jobs ------------------------------------------------------------------------------

    async def register(self, jobs: Sequence[JobSpec]) -> None:
        """Publish each job's description unless its latest one is the same."""
        nats = _driver()
        js = await self._ensure_stream()
        for spec in jobs:
            body = json.dumps({"n": spec.name, "k": stored_kind(spec),
                               "s": spec.schedule}).encode()
            try:
                last = await js.get_last_msg(self.stream, self.job_subject(spec.name))
                if last.data == body:
                    continue
            except nats.js.errors.NotFoundError:
                pass
            except Exception as exc:
                raise StoreError(f"reading job {spec.name!r} failed: {exc}") from exc
            await self._publish(self.job_subject(spec.name), body, {})

    async def known_jobs(self) -> list[JobSpec]:
        """Jobs any instance registered on this stream and prefix."""
        js = await self._jetstream()
        pattern = self.job_subject("*")
        try:
            info = await js.stream_info(self.stream, subjects_filter=pattern)
        except _driver().js.errors.NotFoundError:
            return []  # no stream yet: nothing was registered
        except Exception as exc:
            raise StoreError(f"listing jobs of stream {self.stream!r} failed: {exc}") from exc
        try:
            subjects = sorted(info.state.subjects or {})
            bodies = [(subject, (await js.get_last_msg(self.stream, subject)).data)
                      for subject in subjects]
        except Exception as exc:
            raise StoreError(f"listing jobs of stream {self.stream!r} failed: {exc}") from exc
        return readable(bodies, _job_spec, f"{self!r}", lambda item: f"{item[0]}: {item[1]!r}")


def _job_spec(item: tuple[str, bytes]) -> JobSpec:
    raw = json.loads(item[1])
    return stored_spec(str(raw["n"]), str(raw["k"]), str(raw["s"]))


def _count(value: object, option: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{option} must be an int, got {type(value).__name__}: {value!r}")
    if value < 1:
        raise ValueError(f"{option} must be at least 1, got {value!r}")
    return value


def _now_ms() -> int:
    return int(time.time() * 1000)


__all__ = ["NatsBackend"]
