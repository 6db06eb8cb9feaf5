"""Backends, and [`from_url()`][anarchon.backends.from_url] to build one from a URL.

Drivers are imported lazily: a missing extra fails only when its backend is used, with
an ``ImportError`` that gives the ``pip install`` line.
"""

from __future__ import annotations

import importlib
from typing import Any
from urllib.parse import urlsplit

from .base import Backend, ClaimBackend, LeaseBackend
from .sqlite import SqliteBackend

__all__ = ["Backend", "ClaimBackend", "LeaseBackend", "SqliteBackend", "from_url"]

# URL scheme -> "module:Class"; each class parses its own URL in ``from_url``.
_SCHEMES = {
    "sqlite": "anarchon.backends.sqlite:SqliteBackend",
    "redis": "anarchon.backends.redis:RedisBackend",
    "rediss": "anarchon.backends.redis:RedisBackend",
    "unix": "anarchon.backends.redis:RedisBackend",
    "valkey": "anarchon.backends.redis:ValkeyBackend",
    "valkeys": "anarchon.backends.redis:ValkeyBackend",
    "postgres": "anarchon.backends.postgres:PostgresBackend",
    "postgresql": "anarchon.backends.postgres:PostgresBackend",
    "amqp": "anarchon.backends.rabbitmq:RabbitMQBackend",
    "amqps": "anarchon.backends.rabbitmq:RabbitMQBackend",
    "nats": "anarchon.backends.nats:NatsBackend",
    "tls": "anarchon.backends.nats:NatsBackend",
    # the project database of a configured Django process (anarchon_django)
    "django": "anarchon_django.store.backend:DjangoBackend",
}


def from_url(url: str, **options: Any) -> Backend:
    """Build a backend from a URL such as ``sqlite:///jobs.db`` or ``redis://localhost``.

    Query parameters the backend knows (``table``, ``prefix``, ``strategy`` …) become
    options; keyword ``options`` override them. Unknown schemes raise ``ValueError``.
    """
    if not isinstance(url, str):
        raise TypeError(f"backend URL must be a str, got {type(url).__name__}")
    scheme = urlsplit(url).scheme.lower()
    target = _SCHEMES.get(scheme)
    if target is None:
        raise ValueError(f"unknown backend URL scheme {scheme!r} in {url!r}; use one of: "
                         + ", ".join(sorted(_SCHEMES)))
    module_name, class_name = target.split(":")
    cls = getattr(importlib.import_module(module_name), class_name)
    backend: Backend = cls.from_url(url, **options)
    return backend
