"""Building the store from ``ANARCHON["BACKEND"]``, including the ``"django"`` backend.

The ``"django"`` backend is a lease store written on the Django ORM
(``anarchon_django.store``): ordinary models in the project's database, the one
``OPTIONS["database"]`` names or ``DATABASE_ROUTERS`` choose.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.db import connections
from django.utils.module_loading import import_string

from anarchon import from_url
from anarchon.backends import Backend
from anarchon_django.settings.conf import AnarchonSettings, SettingsError

#: libpq parameters passed on from ``DATABASES[alias]["OPTIONS"]``
LIBPQ_OPTIONS = frozenset({
    "sslmode", "sslrootcert", "sslcert", "sslkey", "sslpassword", "sslcrl", "connect_timeout",
    "application_name", "options", "target_session_attrs", "passfile", "service",
    "keepalives", "keepalives_idle", "keepalives_interval", "keepalives_count",
})


def build_backend(config: AnarchonSettings) -> Backend:
    """The backend ``config`` names. No I/O: backends connect on ``open()``."""
    backend, options = config.backend, dict(config.options)
    if isinstance(backend, Backend):
        if options:
            raise SettingsError("ANARCHON['OPTIONS'] cannot apply to a Backend instance",
                                "anarchon.E003", "pass the options to the backend yourself")
        return backend
    try:
        if backend == "django":
            options.setdefault("trigger_ttl", trigger_ttl(config))
            return django_backend(**options)
        if "://" in backend:
            return from_url(backend, **options)
        cls = import_string(backend)
    except SettingsError:
        raise
    except ImportError as exc:
        raise SettingsError(f"ANARCHON['BACKEND'] {backend!r} cannot be imported: {exc}",
                            "anarchon.E003", "install the extra it needs, e.g. "
                            'pip install "anarchon[redis]"') from exc
    except (TypeError, ValueError) as exc:
        raise SettingsError(f"ANARCHON['BACKEND'] {backend!r}: {exc}", "anarchon.E003") from exc
    if not (isinstance(cls, type) and issubclass(cls, Backend)):
        raise SettingsError(f"ANARCHON['BACKEND'] {backend!r} is not an anarchon Backend class",
                            "anarchon.E003")
    try:
        instance: Backend = cls(**options)
    except (TypeError, ValueError) as exc:
        raise SettingsError(f"ANARCHON['BACKEND'] {backend!r}: {exc}", "anarchon.E003") from exc
    return instance


def trigger_ttl(config: AnarchonSettings) -> float:
    """The default life of a manual-run request: the core's ``max(lease, 60 s)``
    (``anarchon.backends.trigger_rules.trigger_ttl_for``)."""
    from anarchon.backends.trigger_rules import trigger_ttl_for
    from anarchon.jobs.definition import SchedulerOptions

    scheduler = {k: v for k, v in config.scheduler.items() if k in ("lease", "heartbeat")}
    try:
        lease = SchedulerOptions.build(scheduler).lease
    except (TypeError, ValueError):
        lease = 30.0  # reported by the system checks
    return trigger_ttl_for(lease)


def django_backend(database: str | None = None, trigger_ttl: Any = 60.0,
                   **options: Any) -> Backend:
    """The ORM store (``DjangoBackend``) in the
    project database ``database`` (default: the one ``DATABASE_ROUTERS`` pick).
    """
    from anarchon_django.store.backend import DjangoBackend

    if options:
        raise SettingsError(f"unknown ANARCHON['OPTIONS'] {sorted(options)} for the 'django' "
                            "backend", "anarchon.E003", "it takes 'database' and 'trigger_ttl'")
    if database is not None and database not in connections:
        raise SettingsError(f"ANARCHON['OPTIONS']['database'] {database!r} is not in "
                            "DATABASES", "anarchon.E003",
                            f"use one of {sorted(connections.settings)}")
    try:
        return DjangoBackend(database, trigger_ttl=trigger_ttl)
    except (TypeError, ValueError) as exc:
        raise ImproperlyConfigured(f"ANARCHON backend 'django': {exc}") from exc


def postgres_dsn(config: Mapping[str, Any]) -> str:
    """A libpq connection string for a Django PostgreSQL ``DATABASES`` entry."""
    from psycopg.conninfo import make_conninfo

    params: dict[str, Any] = {
        "dbname": config.get("NAME") or None,
        "user": config.get("USER") or None,
        "password": config.get("PASSWORD") or None,
        "host": config.get("HOST") or None,
        "port": str(config["PORT"]) if config.get("PORT") else None,
    }
    for key, value in (config.get("OPTIONS") or {}).items():
        if key in LIBPQ_OPTIONS and isinstance(value, (str, int)):
            params[key] = value
    return make_conninfo("", **{k: v for k, v in params.items() if v is not None})


def backend_kind(config: AnarchonSettings) -> str:
    """``"sqlite"``, ``"postgres"``, ``"redis"`` … as far as known without I/O."""
    backend = config.backend
    if isinstance(backend, Backend):
        return backend.name.split(":")[0]
    if backend == "django":
        from django.db import router

        from anarchon_django.store.models import StoreRun

        alias = config.options.get("database") or router.db_for_write(StoreRun)
        if alias in connections:
            vendor = connections[alias].vendor
            return {"postgresql": "postgres"}.get(vendor, vendor)
        return "unknown"
    if "://" in backend:
        scheme = backend.split("://", 1)[0].lower()
        return {"postgresql": "postgres", "rediss": "redis", "valkeys": "valkey",
                "amqps": "amqp"}.get(scheme, scheme)
    return "custom"
