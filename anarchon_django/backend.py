"""Building the store from ``ANARCHON["BACKEND"]``, including the ``"django"`` backend.

The ``"django"`` backend is the core's own SQLite or PostgreSQL backend pointed at one of
the project's databases (``OPTIONS["database"]``, default ``"default"``), with its tables
(``OPTIONS["table"]``, default ``anarchon_runs``) beside the application's. It opens its
own connection from the database settings instead of borrowing Django's: Django's
connections are per thread and belong to the request or job that uses them, while the
scheduler heartbeats from its own thread.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.db import connections
from django.utils.module_loading import import_string

from anarchon import SqliteBackend, from_url
from anarchon.backends import Backend

from .conf import AnarchonSettings, SettingsError

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


def django_backend(database: str = "default", table: str = "anarchon_runs",
                   **options: Any) -> Backend:
    """The core backend for the project database ``database`` (SQLite or PostgreSQL)."""
    if database not in connections:
        raise SettingsError(f"ANARCHON['OPTIONS']['database'] {database!r} is not in "
                            "DATABASES", "anarchon.E003",
                            f"use one of {sorted(connections.settings)}")
    connection = connections[database]
    config = connection.settings_dict
    if connection.vendor == "sqlite":
        name = str(config["NAME"])
        if connection.creation.is_in_memory_db(name):  # type: ignore[attr-defined]
            raise SettingsError(
                f"DATABASES[{database!r}] is an in-memory SQLite database, which other "
                "processes cannot share", "anarchon.E003",
                "use a file (for tests: DATABASES[...]['TEST']['NAME'] = a file path)")
        return SqliteBackend(name, table=table, **options)
    if connection.vendor == "postgresql":
        from anarchon.backends.postgres import PostgresBackend

        return PostgresBackend(postgres_dsn(config), table=table, **options)
    raise ImproperlyConfigured(
        f"ANARCHON backend 'django' supports SQLite and PostgreSQL databases, not "
        f"{connection.vendor!r} (DATABASES[{database!r}]); set ANARCHON['BACKEND'] to a URL "
        "such as 'redis://localhost:6379'")


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
        alias = config.options.get("database", "default")
        if alias in connections:
            vendor = connections[alias].vendor
            return {"postgresql": "postgres"}.get(vendor, vendor)
        return "unknown"
    if "://" in backend:
        scheme = backend.split("://", 1)[0].lower()
        return {"postgresql": "postgres", "rediss": "redis", "valkeys": "valkey",
                "amqps": "amqp"}.get(scheme, scheme)
    return "custom"
