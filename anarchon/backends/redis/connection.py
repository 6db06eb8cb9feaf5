"""Connections, keys, scripts and history records shared by the Redis/Valkey strategies.

Clients: a URL, a dict of connection kwargs, or the application's own client — redis-py
or valkey-py, asyncio or sync (sync calls run in a worker thread), standalone or Cluster.
Clients built here are closed by ``RedisStore.close()``; the user's never are.

Keys: see ``keys.py`` (a job's keys share its hash tag; the namespace's control keys
share the trigger list's slot). The registry hash ``<prefix>jobs`` holds the key format
(``KEY_FORMAT``) under the field ``""`` (never a job name).
"""

from __future__ import annotations

import asyncio
import inspect
import json
import re
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from importlib import resources
from typing import Any, Literal
from urllib.parse import urlsplit, urlunsplit

from ...errors import IncompatibleStoreError, StoreDataError, StoreError
from ...history import RunRecord
from ..base import EARLY_TOLERANCE_MS
from ..decoding import checked, readable
from .keys import JobKeys, NamespaceKeys, check_prefix, escape_name

Kind = Literal["redis", "valkey"]
#: connections in a pool anarchon opens; more concurrent calls wait for one
MAX_CONNECTIONS = 50

_SCRIPT_NAMES = ("claim", "claim_many", "heartbeat", "release", "finish", "finish_many",
                 "manual", "read", "register", "claim_script", "triggers", "trigger_request",
                 "note", "control", "skip", "instance")
#: libraries prepended (after common.lua) to the scripts that share their functions
_SCRIPT_LIBS = {"claim": ("claim_lib",), "claim_many": ("claim_lib",),
                "finish": ("finish_lib",), "finish_many": ("finish_lib",)}


#: the layout of the keys: 1 was ``{<prefix><job>}`` (pairs could collide), 2 adds ``:``
KEY_FORMAT = "2"


def _load_script(name: str) -> str:
    package = resources.files(__package__ or "anarchon.backends.redis")
    parts = ("common", *_SCRIPT_LIBS.get(name, ()), name)
    # the one tolerance of every lease store, from Python (a constant, never user input)
    header = f"local EARLY_MS = {int(EARLY_TOLERANCE_MS)}\n"
    return header + "\n".join(package.joinpath(f"{part}.lua").read_text(encoding="utf-8")
                     for part in parts)


def import_error(kind: Kind) -> ImportError:
    extra = "redis" if kind == "redis" else "valkey"
    return ImportError(f"the {kind} backend needs a client library: "
                       f'pip install "anarchon[{extra}]"')


def _driver_module(kind: Kind) -> Any:
    """redis.asyncio (preferred for Redis) or valkey.asyncio (preferred for Valkey)."""
    order = ("redis", "valkey") if kind == "redis" else ("valkey", "redis")
    for module in order:
        try:
            return __import__(f"{module}.asyncio", fromlist=["Redis"])
        except ImportError:
            continue
    raise import_error(kind)


def check_driver(kind: Kind, client: object) -> None:
    """Fail at construction (no I/O) when we must build a client and no driver exists."""
    if isinstance(client, (str, dict)):
        _driver_module(kind)


def _normalise_url(url: str) -> str:
    parts = urlsplit(url)
    scheme = {"valkey": "redis", "valkeys": "rediss"}.get(parts.scheme, parts.scheme)
    return urlunsplit((scheme, parts.netloc, parts.path, parts.query, parts.fragment))


def describe(client: object) -> str:
    """Where a client points, for error messages (never the password)."""
    if isinstance(client, str):
        parts = urlsplit(client)
        return f"{parts.hostname or 'localhost'}:{parts.port or 6379}"
    if isinstance(client, dict):
        return f"{client.get('host', 'localhost')}:{client.get('port', 6379)}"
    try:
        kwargs = client.connection_pool.connection_kwargs  # type: ignore[attr-defined]
        return f"{kwargs.get('host', 'localhost')}:{kwargs.get('port', 6379)}"
    except AttributeError:
        return type(client).__name__


class RedisStore:
    """One connection (own or the user's) and the scripts, with error translation."""

    def __init__(self, kind: Kind, client: object, prefix: str,
                 cluster: bool | None = None) -> None:
        self.kind = kind
        self.prefix = check_prefix(prefix)
        self._source = client
        self._cluster_option = cluster
        self._client: Any = None
        self._own = isinstance(client, (str, dict))
        self.source = client  # what the backend was built on (a URL, kwargs or a client)
        self.cluster_option = cluster
        self._sync = False
        self.cluster = False
        self._scripts: dict[str, Any] = {}
        self._lock: asyncio.Lock | None = None
        self.server_name = kind
        self.version: tuple[int, ...] = ()
        self.where = describe(client)

    # -- connecting ------------------------------------------------------------------

    async def connect(self) -> None:
        """Connect (once) and read the server version. Safe to call repeatedly."""
        if self._client is not None:
            return
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self._client is None:
                await self._connect()

    async def _connect(self) -> None:
        if self._own:
            client = await self._open_own()
        else:
            client = self._source
            if not hasattr(client, "execute_command"):
                raise TypeError(f"unsupported {self.kind} client {type(client).__name__}: "
                                "pass a URL, a dict of connection kwargs, or a redis-py / "
                                "valkey-py client")
            self._sync = not inspect.iscoroutinefunction(client.execute_command)
            self.cluster = "Cluster" in type(client).__name__
        scripts = {name: client.register_script(_load_script(name)) for name in _SCRIPT_NAMES}
        info = await self._call(client.execute_command, "INFO", "server")
        self._read_version(info)
        self._scripts = scripts
        self._client = client

    async def _open_own(self) -> Any:
        driver = _driver_module(self.kind)
        source = self._source
        try:
            if isinstance(source, str):
                url = _normalise_url(source)
                # A burst of due jobs must queue for a connection, not fail: the default
                # pool raises once it holds 100 connections.
                pool = driver.BlockingConnectionPool.from_url(
                    url, max_connections=MAX_CONNECTIONS, timeout=None)
                client = driver.Redis.from_pool(pool)
                cluster = self._cluster_option
                if cluster is None:
                    info = await client.execute_command("INFO", "cluster")
                    cluster = info_dict(info).get("cluster_enabled") == "1"
                if cluster:
                    await client.aclose()
                    cluster_cls = driver.RedisCluster if hasattr(driver, "RedisCluster") \
                        else driver.ValkeyCluster
                    client = cluster_cls.from_url(url)
                    await client.initialize()
                    self.cluster = True
                return client
            assert isinstance(source, dict)
            if self._cluster_option:
                cluster_cls = getattr(driver, "RedisCluster", None) or driver.ValkeyCluster
                client = cluster_cls(**source)
                await client.initialize()
                self.cluster = True
                return client
            pool = driver.BlockingConnectionPool(
                max_connections=MAX_CONNECTIONS, timeout=None, **source)
            return driver.Redis.from_pool(pool)
        except (TypeError, ValueError):
            raise
        except Exception as exc:
            raise self.translate(exc) from exc

    def _read_version(self, info: Any) -> None:
        values = info_dict(info)
        if "valkey_version" in values or values.get("server_name") == "valkey":
            self.server_name = "valkey"
            text = values.get("valkey_version", values.get("redis_version", "0"))
        else:
            self.server_name = "redis"
            text = values.get("redis_version", "0")
        self.version = tuple(int(p) for p in re.findall(r"\d+", text)[:3])

    @property
    def server_text(self) -> str:
        return f"{self.server_name.capitalize()} {'.'.join(map(str, self.version))}"

    def require_version(self, minimum: tuple[int, ...], what: str) -> None:
        if self.server_name == "redis" and self.version < minimum:
            raise IncompatibleStoreError(
                f"{what} needs Redis {'.'.join(map(str, minimum))}+; the server at "
                f"{self.where} is {self.server_text}")

    async def close(self) -> None:
        client, self._client = self._client, None
        if client is None or not self._own:
            return
        closer = getattr(client, "aclose", None) or getattr(client, "close", None)
        if closer is not None:
            result = closer()
            if inspect.isawaitable(result):
                await result

    # -- calling -----------------------------------------------------------------------

    def translate(self, exc: BaseException) -> Exception:
        """Driver errors -> StoreError naming the server; our own errors pass through."""
        if isinstance(exc, (StoreError, IncompatibleStoreError)):
            return exc
        text = str(exc)
        if is_data_error(text):
            # the same error of every script reads the same (the log says it once)
            text = re.sub(r"\s*script: \w+, on @user_script:\d+\.?", "", text)
            return StoreDataError(f"{self.kind} at {self.where}: a key under prefix "
                                  f"{self.prefix!r} holds data that is not anarchon's "
                                  f"({text})")
        if "NOSCRIPT" in text:
            return StoreError(f"{self.kind} at {self.where}: script missing ({text})")
        return StoreError(f"{self.kind} at {self.where}: {type(exc).__name__}: {text}")

    async def _call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        try:
            if self._sync:
                return await asyncio.to_thread(fn, *args, **kwargs)
            return await fn(*args, **kwargs)
        except (asyncio.CancelledError, KeyboardInterrupt):
            raise
        except Exception as exc:
            raise self.translate(exc) from exc

    async def command(self, *args: Any) -> Any:
        if self._client is None:
            await self.connect()
        return await self._call(self._client.execute_command, *args)

    async def script(self, name: str, keys: Sequence[str], args: Sequence[object]) -> Any:
        """One EVALSHA (redis-py reloads the script on NOSCRIPT and retries)."""
        if self._client is None:
            await self.connect()
        return await self._call(self._scripts[name], keys=list(keys),
                                args=[a if isinstance(a, (bytes, str)) else str(a)
                                      for a in args])

    async def scripts(self, calls: Sequence[tuple[str, Sequence[str], Sequence[object]]]
                      ) -> list[Any]:
        """Several scripts in one round trip (EVALSHA in a pipeline); after a NOSCRIPT
        (a restarted or flushed server) they are sent again one by one, loading them."""
        if self._client is None:
            await self.connect()
        commands = [("EVALSHA", self._scripts[name].sha, len(keys), *keys, *args)
                    for name, keys, args in calls]
        answers = await self.pipeline(commands)
        if any(isinstance(a, Exception) and ("NoScript" in type(a).__name__
                                             or "NOSCRIPT" in str(a)) for a in answers):
            return [await self.script(name, keys, args) for name, keys, args in calls]
        for answer in answers:
            if isinstance(answer, Exception):
                raise self.translate(answer)
        return answers

    async def pipeline(self, commands: Sequence[Sequence[object]]) -> list[Any]:
        """Send commands in one round trip (non-transactional); errors come back as values."""
        if self._client is None:
            await self.connect()
        pipe = self._client.pipeline(transaction=False)
        for cmd in commands:
            pipe.execute_command(*cmd)
        return list(await self._call(pipe.execute, raise_on_error=False))

    # -- keys ----------------------------------------------------------------------------

    def keys(self, name: str) -> JobKeys:
        return JobKeys("{" + self.prefix + ":" + escape_name(name) + "}")

    @property
    def namespace(self) -> NamespaceKeys:
        """The namespace's control keys (one Cluster slot: the trigger list's)."""
        return NamespaceKeys(self.triggers_key)

    @property
    def jobs_key(self) -> str:
        return f"{self.prefix}jobs"

    @property
    def triggers_key(self) -> str:
        return f"{self.prefix}triggers"

    @property
    def wake_channel(self) -> str:
        """The pub/sub channel of this prefix's wake-ups (hand-overs, trigger requests)."""
        return f"{self.prefix}wake"

    @property
    def wake_client_name(self) -> str:
        """``CLIENT SETNAME`` of the subscriber connection (to find it in ``CLIENT LIST``)."""
        return f"anarchon-wake:{self.prefix}"

    # -- pub/sub -------------------------------------------------------------------------

    @property
    def can_subscribe(self) -> bool:
        """Whether ``subscriber()`` can make a client (connected, asyncio client)."""
        return self._client is not None and not self._sync

    def subscriber(self) -> Any | None:
        """A new asyncio client for ``SUBSCRIBE`` only, or None if there is no way to make one
        (a sync client passed in: its instances poll instead).

        It copies the connection settings of our client (on a Cluster, of its default node:
        a classic ``PUBLISH`` reaches every node) with retries turned off, so a lost
        connection surfaces as an error instead of a silent reconnect that would hide
        messages missed meanwhile. The caller closes it (``aclose``).
        """
        client = self._client
        if not self.can_subscribe:
            return None
        if self.cluster:
            node = client.get_default_node()
            connection_class = node.connection_class
            kwargs = dict(node.connection_kwargs)
            kwargs.pop("event_dispatcher", None)
        else:
            pool = client.connection_pool
            connection_class = pool.connection_class
            kwargs = dict(pool.connection_kwargs)
        root = connection_class.__module__.split(".")[0]
        driver = __import__(f"{root}.asyncio", fromlist=["Redis"])
        retry_module = __import__(f"{root}.asyncio.retry", fromlist=["Retry"])
        backoff_module = __import__(f"{root}.backoff", fromlist=["NoBackoff"])
        kwargs["retry"] = retry_module.Retry(backoff_module.NoBackoff(), 0)
        kwargs["socket_keepalive"] = True  # notice a dead peer without sending anything
        kwargs.pop("socket_timeout", None)  # reads block until a message arrives
        kwargs["client_name"] = self.wake_client_name
        pool_class = driver.ConnectionPool
        return driver.Redis.from_pool(pool_class(connection_class=connection_class,
                                                 max_connections=2, **kwargs))


def info_dict(info: Any) -> dict[str, str]:
    """The fields of an ``INFO`` reply (parsed or raw text)."""
    if isinstance(info, dict):
        return {str(k): str(v) for k, v in info.items()}
    text = info.decode() if isinstance(info, bytes) else str(info)
    out = {}
    for line in text.splitlines():
        if ":" in line and not line.startswith("#"):
            key, _, value = line.partition(":")
            out[key.strip()] = value.strip()
    return out


#: what Redis/Valkey answer when a key holds another type or a script read a record that
#: does not decode (cjson); the server answered, so these are data errors
_DATA_ERRORS = ("WRONGTYPE", "Expected value but found", "Expected comma or",
                "Expected object key", "Found invalid", "attempt to index a",
                "attempt to compare", "attempt to perform arithmetic")


def is_data_error(message: str) -> bool:
    """Whether a server error means the data is not anarchon's (not that it is down)."""
    return any(marker in message for marker in _DATA_ERRORS)


def text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _dt(ms: float) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc)


def parse_record(name: str, raw: Any) -> RunRecord:
    """An attempt record written by the scripts, as a [`RunRecord`][anarchon.history.RunRecord]."""
    data = json.loads(text(raw))
    slot = int(data["slot"])
    started = float(data["start"])
    finished = float(data["fin"]) if data.get("fin") is not None else None
    return RunRecord(
        name=name, slot=slot, scheduled_at=_dt(slot), instance_id=str(data["inst"]),
        manual=bool(data.get("manual", False)), attempt=int(data["att"]),
        reason=data["reason"], status=data["status"], started_at=_dt(started),
        finished_at=_dt(finished) if finished is not None else None,
        duration=(finished - started) / 1000 if finished is not None else None,
        error=data.get("err"))


async def read_history(store: RedisStore, name: str, count: int) -> list[RunRecord]:
    """Newest-first records, attempts and skip records merged (one read-only script
    call)."""
    keys = store.keys(name)
    raws = await store.script("read", [keys.att, keys.hist, keys.skips], ["history", count])
    records = readable(raws, lambda raw: checked(parse_record(name, raw)),
                       f"{store.kind} at {store.where}, hash {keys.att}", repr)
    records.sort(key=lambda r: r.started_at, reverse=True)
    return records[:count]
