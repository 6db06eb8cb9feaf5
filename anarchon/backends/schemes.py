"""Which backend class serves a URL scheme: the core's stores, and any other store
registered in the ``anarchon.backends`` entry-point group.

A distribution that ships a store declares, in its ``pyproject.toml``::

    [project.entry-points."anarchon.backends"]
    mystore = "mypackage.store:MyBackend"

and ``from_url("mystore://…")`` imports ``MyBackend`` and calls its ``from_url``
classmethod with the URL and the options. The core's own schemes (below) cannot be
taken over by an entry point.
"""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points

#: the entry-point group a distribution registers its stores in
GROUP = "anarchon.backends"

# URL scheme -> "module:Class"; each class parses its own URL in ``from_url``.
CORE_SCHEMES = {
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
}


def registered() -> dict[str, str]:
    """Every known scheme -> ``"module:Class"``: the core's, then the entry points'."""
    schemes = {ep.name.lower(): ep.value for ep in entry_points(group=GROUP)}
    schemes.update(CORE_SCHEMES)
    return schemes


def backend_class(scheme: str, url: str) -> type:
    """The class serving ``scheme``; ``ValueError`` listing the known schemes if none."""
    schemes = registered()
    target = schemes.get(scheme)
    if target is None:
        raise ValueError(f"unknown backend URL scheme {scheme!r} in {url!r}; use one of: "
                         + ", ".join(sorted(schemes)) + f" (or install the distribution "
                         f"that registers it in the {GROUP!r} entry-point group)")
    module_name, _, class_name = target.partition(":")
    cls: type = getattr(importlib.import_module(module_name), class_name)
    return cls


__all__ = ["CORE_SCHEMES", "GROUP", "backend_class", "registered"]
