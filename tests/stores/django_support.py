"""The ``"django"`` backend as a test store: one database per namespace, migrated.

Importing this module configures Django in the test process (settings with no project
database of its own), so only the ``django_*`` store modules import it, lazily. Each
namespace gets a database alias added at run time: a SQLite file, a PostgreSQL schema
(``search_path``) in ``ANARCHON_POSTGRES_URL``'s database, or a MariaDB database on
``ANARCHON_MARIADB_URL``'s server; ``migrate anarchon_django`` creates the store there.
The schemas and databases are dropped when the test process exits.
"""

from __future__ import annotations

import atexit
import os
import tempfile
import threading
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote, urlsplit

POSTGRES_URL = (os.environ.get("ANARCHON_POSTGRES_URL")
                or "postgresql://postgres@127.0.0.1:5432/test")
MARIADB_URL = os.environ.get("ANARCHON_MARIADB_URL") or "mysql://root@127.0.0.1:3306/"
_DIR = tempfile.mkdtemp(prefix="anarchon-django-store-")
_lock = threading.Lock()
_cleanups: list[Callable[[], None]] = []


def _setup() -> None:
    import django
    from django.conf import settings

    with _lock:
        if not settings.configured:
            settings.configure(
                DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3",
                                       "NAME": ":memory:"}},
                INSTALLED_APPS=["anarchon_django"], USE_TZ=True,
                DEFAULT_AUTO_FIELD="django.db.models.AutoField", ANARCHON={})
            django.setup()
            atexit.register(_cleanup)


def server_config(kind: str, database: str | None = None) -> dict[str, Any]:
    """A ``DATABASES`` entry for ``kind`` (``postgres``/``mariadb``) from its URL."""
    url = urlsplit(POSTGRES_URL if kind == "postgres" else MARIADB_URL)
    config: dict[str, Any] = {
        "ENGINE": ("django.db.backends.postgresql" if kind == "postgres"
                   else "django.db.backends.mysql"),
        "NAME": database if database is not None else unquote(url.path.lstrip("/")),
        "USER": unquote(url.username or ""), "PASSWORD": unquote(url.password or ""),
        "HOST": url.hostname or "", "PORT": str(url.port or ""),
    }
    if kind == "mariadb":
        config["OPTIONS"] = {"charset": "utf8mb4"}
    return config


def _add_alias(alias: str, config: dict[str, Any]) -> None:
    from django.db import connections

    both = {"default": connections.settings["default"], alias: config}
    connections.settings[alias] = connections.configure_settings(both)[alias]


def admin(kind: str, statement: str) -> None:
    """Run one statement on the server's own database, outside any alias."""
    if kind == "postgres":
        import psycopg

        with psycopg.connect(POSTGRES_URL, autocommit=True, connect_timeout=5) as conn:
            conn.execute(statement)
        return
    import MySQLdb  # type: ignore[import-untyped, unused-ignore]

    config = server_config("mariadb")
    conn = MySQLdb.connect(host=config["HOST"], port=int(config["PORT"] or 3306),
                           user=config["USER"], password=config["PASSWORD"])
    try:
        conn.cursor().execute(statement)
    finally:
        conn.close()


def prepare(kind: str, namespace: str) -> str:
    """A migrated store for ``namespace``; returns its ``django://ALIAS`` URL."""
    _setup()
    from django.core.management import call_command

    alias = f"{kind}_{namespace}"
    if kind == "sqlite":
        _add_alias(alias, {"ENGINE": "django.db.backends.sqlite3",
                           "NAME": os.path.join(_DIR, namespace + ".db")})
    elif kind == "postgres":
        # namespaces are [a-z0-9_] (tests/conftest.py), safe as identifiers
        admin(kind, f"CREATE SCHEMA {namespace}")
        _cleanups.append(lambda: admin(kind, f"DROP SCHEMA IF EXISTS {namespace} CASCADE"))
        config = server_config(kind)
        config["OPTIONS"] = {"options": f"-c search_path={namespace}"}
        _add_alias(alias, config)
    else:
        admin(kind, f"CREATE DATABASE {namespace} CHARACTER SET utf8mb4")
        _cleanups.append(lambda: admin(kind, f"DROP DATABASE IF EXISTS {namespace}"))
        _add_alias(alias, server_config(kind, namespace))
    call_command("migrate", "anarchon_django", database=alias, verbosity=0)
    from django.db import connections

    connections[alias].close()  # the test's backends open their own, in their threads
    return f"django://{alias}"


def unavailable(kind: str) -> str | None:
    """Why the store cannot be used here, or None."""
    try:
        import django  # noqa: F401
    except ImportError:
        return 'Django is not installed (pip install "anarchon[django]")'
    if kind == "sqlite":
        return None
    try:
        admin(kind, "SELECT 1")
    except ImportError as exc:
        return f"the driver is not installed ({exc}): pip install \"anarchon[postgres,mysql]\""
    except Exception as exc:
        variable = "ANARCHON_POSTGRES_URL" if kind == "postgres" else "ANARCHON_MARIADB_URL"
        return f"the server at {variable} does not answer: {exc}"
    return None


def _cleanup() -> None:
    from django.db import connections

    connections.close_all()
    for drop in _cleanups:
        try:
            drop()
        except Exception:
            pass
