"""Connecting to NATS and making the JetStream stream, for ``NatsBackend``.

Connecting fails like every other store: a server that does not answer raises one
[`StoreError`][anarchon.errors.StoreError] within the backend's ``timeout`` (default 5 s;
each server of the list is tried twice, 0.1 s apart: a refused connection fails in about
0.1 s), with no nats-py tracebacks in the log. Once
connected, the client reconnects by itself for ever (0.5 s apart); anarchon reports the
outage once (see ``anarchon.engine.outages``), so nats-py's own error callbacks log at DEBUG.

The stream is created by the first write (``register()``, a claim, a manual run), never
by a read: ``anarchon jobs`` on a NATS that holds no stream creates nothing.
"""

from __future__ import annotations

import logging
from typing import Any

from ...engine.aio import within
from ...errors import IncompatibleStoreError, StoreError
from ..urls import redact

logger = logging.getLogger("anarchon")

#: tries of each server when connecting (then one StoreError), and the pause between them
CONNECT_TRIES, CONNECT_PAUSE = 2, 0.1
#: the pause between two reconnection attempts once connected
RECONNECT_WAIT = 0.5


def driver() -> Any:
    try:
        import nats
        import nats.js.api
    except ImportError as exc:  # pragma: no cover - exercised without the extra
        raise ImportError('NatsBackend needs nats-py: pip install "anarchon[nats]"') from exc
    return nats


async def _disconnected() -> None:
    logger.debug("nats-py: disconnected; reconnecting")


async def connect(servers: list[str], timeout: float) -> Any:
    """A connected nats-py client, or one StoreError within ``timeout``."""
    nats = driver()
    client = nats.aio.client.Client()
    where = ",".join(redact(s) for s in servers)
    seen: list[Exception] = []  # nats-py's errors: the last one is the cause

    async def quiet(error: Exception) -> None:
        seen.append(error)
        logger.debug("nats-py: %s: %s", type(error).__name__, error)

    try:
        # bounded tries while connecting (nats-py would retry for ever with -1) ...
        await within(client.connect(
            servers=servers, connect_timeout=timeout, allow_reconnect=True,
            max_reconnect_attempts=CONNECT_TRIES - 1, reconnect_time_wait=CONNECT_PAUSE,
            error_cb=quiet, disconnected_cb=_disconnected, name="anarchon"), timeout)
    except Exception as exc:
        try:
            await client.close()
        except Exception as closing:
            logger.debug("ignored while closing NATS: %s", closing)
        cause: BaseException = seen[-1] if seen else exc
        reason = f"{type(cause).__name__}: {' '.join(str(cause).split())}".rstrip(": ")
        if isinstance(cause, TimeoutError) and not str(cause):
            reason = f"no answer within {timeout:g}s (timeout=)"
        raise StoreError(f"cannot connect to NATS at {where}: {reason}") from None
    # ... and for ever once connected (nats-py reads these options at each reconnect)
    client.options["max_reconnect_attempts"] = -1
    client.options["reconnect_time_wait"] = RECONNECT_WAIT
    return client


def stream_config(name: str, subjects: list[str], per_subject: int, window: float,
                  replicas: int) -> Any:
    api = driver().js.api
    return api.StreamConfig(
        name=name, subjects=subjects, description="anarchon claims and history",
        storage=api.StorageType.FILE, retention=api.RetentionPolicy.LIMITS,
        discard=api.DiscardPolicy.OLD, max_msgs_per_subject=per_subject,
        duplicate_window=window, num_replicas=replicas)


async def read_stream(js: Any, stream: str) -> Any:
    """The stream's info, or None if there is none."""
    nats = driver()
    try:
        return await js.stream_info(stream)
    except nats.js.errors.NotFoundError:
        return None
    except Exception as exc:
        raise StoreError(f"reading stream {stream!r} failed: {exc}") from exc


async def create_stream(js: Any, config: Any, prefix: str) -> None:
    """Create the stream; a clash with another stream's subjects names the options."""
    nats = driver()
    try:
        await js.add_stream(config)
    except nats.js.errors.BadRequestError as exc:
        owner = None
        try:
            owner = await js.find_stream_name_by_subject(config.subjects[0])
        except Exception as finding:
            logger.debug("no stream found for %s: %s", config.subjects[0], finding)
        if owner is not None and owner != config.name:
            raise IncompatibleStoreError(
                f"cannot create JetStream stream {config.name!r}: stream {owner!r} already "
                f"takes the subjects of prefix {prefix!r} ({', '.join(config.subjects)}). "
                f"Use stream={owner!r}, or keep stream={config.name!r} and set prefix= to "
                "one no other stream uses (each stream needs its own prefix)") from exc
        raise IncompatibleStoreError(
            f"cannot create JetStream stream {config.name!r} for subjects "
            f"{config.subjects}: {exc.description or exc} (another stream may take these "
            "subjects: use another prefix= or stream=)") from exc
    except Exception as exc:
        raise StoreError(f"creating stream {config.name!r} failed: {exc}") from exc


__all__ = ["connect", "create_stream", "driver", "read_stream", "stream_config"]
