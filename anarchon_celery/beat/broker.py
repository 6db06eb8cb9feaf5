"""The default store: the broker's Redis, with the broker's connection settings.

When ``anarchon_backend`` is not set and the broker is Redis, the store connects the way
the broker does: the broker URL's query is kept, and the parts of ``broker_use_ssl`` and
``broker_transport_options`` that redis-py understands (TLS files and verification,
socket timeouts, keepalive, health checks) are carried over as URL query parameters. A
Sentinel broker is refused: the store needs its own ``anarchon_backend`` URL there.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

_REDIS_SCHEMES = ("redis", "rediss")
#: broker_use_ssl keys redis-py takes (kombu's names are redis-py's)
_SSL_KEYS = ("ssl_cert_reqs", "ssl_ca_certs", "ssl_certfile", "ssl_keyfile",
             "ssl_check_hostname", "ssl_ca_path", "ssl_ca_data", "ssl_password")
#: broker_transport_options redis-py takes as URL query parameters
_TRANSPORT_KEYS = ("socket_timeout", "socket_connect_timeout", "socket_keepalive",
                   "retry_on_timeout", "health_check_interval")
#: query parameters redis-py reads from a URL (everything else would reach its
#: connection constructor as an unknown keyword)
_QUERY_KEYS = frozenset(_SSL_KEYS) | frozenset(_TRANSPORT_KEYS) | {
    "db", "socket_read_size", "max_connections", "ssl_min_version", "timeout", "protocol",
    "client_name", "ssl_include_verify_flags", "ssl_exclude_verify_flags"}
_CERT_REQS = {ssl.CERT_NONE: "none", ssl.CERT_OPTIONAL: "optional",
              ssl.CERT_REQUIRED: "required"}


class BrokerStoreError(ValueError):
    """The broker's settings cannot be turned into a store URL."""


def _text(value: Any) -> str:
    if isinstance(value, ssl.VerifyMode):
        return _CERT_REQS[value]
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def broker_store_url(broker_url: Any, use_ssl: Any = None,
                     transport_options: Any = None) -> str | None:
    """The store URL for the broker's Redis, or ``None`` if the broker is not Redis.

    Raises `BrokerStoreError` for a Sentinel broker (and for settings of the wrong
    type), naming ``anarchon_backend`` as the fix.
    """
    if not isinstance(broker_url, str):
        return None
    first = broker_url.split(";")[0].strip()
    parts = urlsplit(first)
    scheme = parts.scheme.lower()
    if scheme.startswith("sentinel"):
        raise BrokerStoreError(
            "the broker is Redis Sentinel, which anarchon's store does not follow; set "
            "anarchon_backend to the Redis URL of the current master (or to a PostgreSQL "
            "or SQLite URL)")
    if scheme not in _REDIS_SCHEMES:
        return None
    query: dict[str, str] = {}
    for key, value in parse_qsl(parts.query):
        if key in _QUERY_KEYS:
            query[key] = value
    if use_ssl not in (None, False, True):
        if not isinstance(use_ssl, Mapping):
            raise BrokerStoreError(f"broker_use_ssl must be a dict or a bool, got "
                                   f"{type(use_ssl).__name__}: {use_ssl!r}")
        for key in _SSL_KEYS:
            if use_ssl.get(key) is not None:
                query.setdefault(key, _text(use_ssl[key]))
    if transport_options is not None:
        if not isinstance(transport_options, Mapping):
            raise BrokerStoreError("broker_transport_options must be a dict, got "
                                   f"{type(transport_options).__name__}")
        for key in _TRANSPORT_KEYS:
            if transport_options.get(key) is not None:
                query.setdefault(key, _text(transport_options[key]))
    if "ssl_cert_reqs" in query:
        # kombu also takes "CERT_NONE"; redis-py only "none" / "optional" / "required"
        query["ssl_cert_reqs"] = query["ssl_cert_reqs"].lower().removeprefix("cert_")
    if use_ssl not in (None, False) and scheme == "redis":
        scheme = "rediss"  # kombu turns TLS on for broker_use_ssl with a redis:// URL
    return urlunsplit((scheme, parts.netloc, parts.path or "/0", urlencode(query), ""))


__all__ = ["BrokerStoreError", "broker_store_url"]
