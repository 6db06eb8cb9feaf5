"""Redis 7 (lease strategy): ``ANARCHON_REDIS_URL`` (from ``scripts/servers.py``).

Each namespace becomes its own key ``prefix``, so tests share one server without seeing
each other's jobs.
"""

from __future__ import annotations

import importlib.util
import os
import socket
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from . import StoreSpec, not_set

BASE_URL = os.environ.get("ANARCHON_REDIS_URL") or ""


def url_with_prefix(base: str, namespace: str, scheme: str | None = None) -> str:
    """``base`` with ``prefix=<namespace>:`` added to its query (and the scheme replaced)."""
    parts = urlsplit(base)
    query = [(k, v) for k, v in parse_qsl(parts.query) if k != "prefix"]
    query.append(("prefix", f"{namespace}:"))
    new_scheme = parts.scheme
    if scheme is not None:
        new_scheme = scheme + ("s" if parts.scheme in ("rediss", "valkeys") else "")
    return urlunsplit((new_scheme, parts.netloc, parts.path, urlencode(query), ""))


def redis_unavailable(url: str, variable: str) -> str | None:
    """None when ``PING`` at ``url`` answers ``PONG``, else why not."""
    if not url:
        return not_set(variable)
    if importlib.util.find_spec("redis") is None:
        return 'the redis package is not installed (pip install "anarchon[redis]")'
    parts = urlsplit(url)
    host, port = parts.hostname, parts.port
    if host is None or port is None:
        return f"{variable} names no host and port"
    try:
        with socket.create_connection((host, port), timeout=1.0) as sock:
            if parts.password:
                user = parts.username or "default"
                sock.sendall(_command("AUTH", user, parts.password))
                sock.recv(256)
            sock.sendall(_command("PING"))
            reply = sock.recv(256)
    except OSError as exc:
        return f"no Redis-protocol server at {host}:{port} ({variable}): {exc}"
    if not reply.startswith(b"+PONG"):
        return f"server at {host}:{port} ({variable}) answered {reply[:80]!r} to PING"
    return None


def purge_keys(url: str, namespaces: set[str], cluster: bool = False) -> None:
    """Delete every key at ``url`` whose name holds one of ``namespaces``."""
    import redis
    import redis.cluster

    marks = [namespace.encode() for namespace in namespaces]
    base = urlunsplit(urlsplit(url)._replace(query=""))
    if cluster:
        client: Any = redis.cluster.RedisCluster.from_url(base)
        nodes = [client.get_redis_connection(node) for node in client.get_primaries()]
    else:
        client = redis.Redis.from_url(base)
        nodes = [client]
    try:
        for node in nodes:
            doomed = [key for key in node.scan_iter(count=1000)
                      if any(mark in key for mark in marks)]
            for key in doomed:  # one by one: keys of a cluster node may span slots
                node.delete(key)
    finally:
        client.close()


def _command(*words: str) -> bytes:
    out = [f"*{len(words)}\r\n".encode()]
    for word in words:
        data = word.encode()
        out.append(b"$%d\r\n%s\r\n" % (len(data), data))
    return b"".join(out)


def _url(namespace: str) -> str:
    return url_with_prefix(BASE_URL, namespace)


STORE = StoreSpec(id="redis", make_url=_url, lease=True,
                  unavailable=lambda: redis_unavailable(BASE_URL, "ANARCHON_REDIS_URL"),
                  purge=lambda namespaces: purge_keys(BASE_URL, namespaces))
