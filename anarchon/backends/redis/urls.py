"""Redis/Valkey URLs: anarchon's query options apart from the driver's."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from ...durations import parse_duration
from ..urls import split_options

_URL_OPTIONS = {"prefix", "strategy", "lab", "cluster", "window", "duration", "max_size"}
#: query parameters redis-py / valkey-py read from a URL (plus any ``ssl_*``)
_DRIVER_URL_OPTIONS = {"db", "health_check_interval", "legacy_responses", "max_connections",
                       "protocol", "retry_on_timeout", "socket_connect_timeout",
                       "socket_keepalive", "socket_read_size", "socket_timeout", "timeout",
                       "client_name", "decode_responses", "encoding", "username", "password"}


def split_url(url: str) -> tuple[str, dict[str, Any]]:
    """Separate anarchon's options (prefix, strategy, cluster, window …) from a URL;
    a parameter neither anarchon nor the driver knows raises ``ValueError``."""
    parts = urlsplit(url)

    def check(key: str) -> None:
        if key not in _DRIVER_URL_OPTIONS and not key.startswith("ssl_"):
            raise ValueError(f"unknown option {key!r} in Redis URL {parts.scheme}://"
                             f"{parts.hostname}…; anarchon's: {sorted(_URL_OPTIONS)}, the "
                             f"driver's: {sorted(_DRIVER_URL_OPTIONS)}")

    client_url, ours = split_options(url, _URL_OPTIONS, keep_blank=True, keep_fragment=True,
                                     check=check)
    return client_url, {key: _url_value(key, value) for key, value in ours.items()}


def _url_value(key: str, value: str) -> object:
    if key == "cluster":
        return value.lower() in ("1", "true", "yes", "on")
    if key == "lab":
        if value.lower() in ("1", "true", "yes", "on"):
            return True
        if value.lower() in ("", "0", "false", "no", "off"):
            return False
        raise ValueError(f"lab={value!r} in a Redis URL: use lab=1 (or lab=0)")
    if key in ("window", "duration"):
        return parse_duration(value, option=key)
    if key == "max_size":
        return int(value)
    return value

