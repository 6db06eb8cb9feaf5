"""NATS JetStream (claim-only): ``ANARCHON_NATS_URL`` (from ``scripts/servers.py``).

Each namespace gets its own stream (the namespace upper-cased) and subject ``prefix``
(``<namespace>.``). ``duplicate_window`` is 90 s so jobs with the default ``jitter`` and
``max_late`` can be added; ``history_size`` is 100 to keep test streams small.
"""

from __future__ import annotations

import importlib.util
import json
import os
import socket
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from tests.harness.cleanup import remove
from tests.harness.cleanup import stream_for as stream_for  # the tests' name for it

from . import StoreSpec, not_set, remember

BASE_URL = os.environ.get("ANARCHON_NATS_URL") or ""
WINDOW = "90s"


def url_for(namespace: str, **options: str) -> str:
    """The backend URL with this namespace's ``stream`` and ``prefix`` (plus ``options``)."""
    remember("nats", namespace)
    parts = urlsplit(BASE_URL)
    query = dict(parse_qsl(parts.query))
    query.update(stream=stream_for(namespace), prefix=f"{namespace}.",
                 duplicate_window=WINDOW, history_size="100", **options)
    return urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode(query), ""))


def _unavailable() -> str | None:
    if not BASE_URL:
        return not_set("ANARCHON_NATS_URL")
    if importlib.util.find_spec("nats") is None:
        return 'nats-py is not installed (pip install "anarchon[nats]")'
    parts = urlsplit(BASE_URL.split(",")[0])
    host, port = parts.hostname, parts.port
    if host is None or port is None:
        return "ANARCHON_NATS_URL names no host and port"
    try:
        with socket.create_connection((host, port), timeout=2.0) as sock:
            line = b""
            while not line.endswith(b"\r\n") and len(line) < 65536:
                chunk = sock.recv(4096)
                if not chunk:
                    break
                line += chunk
    except OSError as exc:
        return f"no NATS server at {host}:{port} (ANARCHON_NATS_URL): {exc}"
    if not line.startswith(b"INFO "):
        return f"server at {host}:{port} (ANARCHON_NATS_URL) is not NATS"
    try:
        info = json.loads(line[5:])
    except ValueError:
        return f"server at {host}:{port} (ANARCHON_NATS_URL) sent an unreadable INFO"
    if not info.get("jetstream"):
        return f"NATS at {host}:{port} (ANARCHON_NATS_URL) runs without JetStream (-js)"
    return None


def _purge(namespaces: set[str]) -> None:
    """Delete the namespaces' streams."""
    import asyncio

    import nats
    from nats.js.errors import NotFoundError

    async def delete() -> None:
        connection = await nats.connect(BASE_URL)
        try:
            jetstream = connection.jetstream()
            for namespace in namespaces:
                try:
                    await jetstream.delete_stream(stream_for(namespace))
                except NotFoundError:
                    pass
        finally:
            await connection.close()

    asyncio.run(delete())


STORE = StoreSpec(id="nats", make_url=url_for, lease=False, unavailable=_unavailable,
                  purge=_purge)


async def cleanup(namespace: str, jobs: list[str]) -> None:
    """Delete the namespace's stream."""
    await remove("nats", BASE_URL, namespace, jobs)
