"""The ``"django"`` store (the ORM backend) on SQLite, PostgreSQL and MariaDB, set up in
this process for tests and benchmarks.

:func:`prepare` configures Django here (once: settings with only ``anarchon_django``),
adds a database alias for one namespace — a SQLite file, a PostgreSQL schema (through
``search_path``) in ``ANARCHON_POSTGRES_URL``'s database, or a MariaDB database on the
server of ``ANARCHON_MARIADB_URL`` (both set by ``scripts/servers.py``) — runs
``migrate anarchon_django`` there and returns the ``django://ALIAS`` URL that
:func:`anarchon.from_url` understands. Processes forked afterwards inherit the
configuration; spawned ones call :func:`use` with :func:`aliases_of` the URL.
:func:`drop_all` removes the schemas and databases.
"""

from __future__ import annotations

import os
import tempfile
import threading
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote, urlsplit

#: the stores, as ``--backends`` names them
STORES = ("django-sqlite", "django-postgres", "django-mariadb")
#: where each server is found (set by scripts/servers.py); no port is assumed
VARIABLES = {"postgres": "ANARCHON_POSTGRES_URL", "mariadb": "ANARCHON_MARIADB_URL"}
_lock = threading.Lock()
_drops: list[Callable[[], None]] = []
_dir: list[str] = []
_configs: dict[str, dict[str, Any]] = {}  # alias -> its DATABASES entry, as given


def mysql_driver() -> None:
    """Django's MySQL backend imports ``MySQLdb``: PyMySQL (the ``mysql`` extra, what
    ``anarchon[all]`` installs) stands in for it when installed, else mysqlclient."""
    try:
        import pymysql  # type: ignore[import-untyped, unused-ignore]
    except ImportError:
        return
    pymysql.install_as_MySQLdb()


def configure() -> None:
    """Configure Django in this process (no project database of its own), once."""
    import django
    from django.conf import settings

    mysql_driver()
    with _lock:
        if not settings.configured:
            settings.configure(
                DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3",
                                       "NAME": ":memory:"}},
                INSTALLED_APPS=["anarchon_django"], USE_TZ=True,
                DEFAULT_AUTO_FIELD="django.db.models.AutoField", ANARCHON={})
            django.setup()


def server_url(kind: str) -> str:
    """The URL of the ``postgres`` or ``mariadb`` server ("" when its variable is unset)."""
    return os.environ.get(VARIABLES[kind], "")


def server_config(kind: str, database: str | None = None) -> dict[str, Any]:
    """A ``DATABASES`` entry for ``kind`` (``postgres``/``mariadb``) from its URL."""
    url = urlsplit(server_url(kind))
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


def admin(kind: str, statement: str) -> None:
    """Run one statement on the server itself (``postgres``/``mariadb``), no alias."""
    if kind == "postgres":
        import psycopg

        with psycopg.connect(server_url(kind), autocommit=True, connect_timeout=5) as conn:
            conn.execute(statement)
        return
    mysql_driver()
    import MySQLdb  # type: ignore[import-untyped, unused-ignore]

    config = server_config("mariadb")
    conn = MySQLdb.connect(host=config["HOST"], port=int(config["PORT"] or 3306),
                           user=config["USER"], password=config["PASSWORD"])
    try:
        conn.cursor().execute(statement)
    finally:
        conn.close()


def _add_alias(alias: str, config: dict[str, Any]) -> None:
    from django.db import connections

    both = {"default": connections.settings["default"], alias: config}
    connections.settings[alias] = connections.configure_settings(both)[alias]
    _configs[alias] = config


def aliases_of(url: str) -> dict[str, dict[str, Any]]:
    """The database alias behind a ``django://ALIAS`` URL made by :func:`prepare`, with
    its settings (JSON-able), for :func:`use` in another process."""
    alias = urlsplit(url).netloc
    return {alias: _configs[alias]}


def use(aliases: dict[str, dict[str, Any]]) -> None:
    """Configure Django in this (spawned) process with aliases :func:`prepare` made."""
    configure()
    for alias, config in aliases.items():
        _add_alias(alias, config)


def prepare(kind: str, namespace: str) -> str:
    """A migrated store for ``namespace`` (``[a-z0-9_]``) on ``kind``; its URL."""
    configure()
    from django.core.management import call_command
    from django.db import connections

    alias = f"{kind}_{namespace}"
    if kind == "sqlite":
        if not _dir:
            _dir.append(tempfile.mkdtemp(prefix="anarchon-django-store-"))
        _add_alias(alias, {"ENGINE": "django.db.backends.sqlite3",
                           "NAME": os.path.join(_dir[0], namespace + ".db")})
    elif kind == "postgres":
        admin(kind, f"CREATE SCHEMA {namespace}")
        _drops.append(lambda: admin(kind, f"DROP SCHEMA IF EXISTS {namespace} CASCADE"))
        config = server_config(kind)
        config["OPTIONS"] = {"options": f"-c search_path={namespace}"}
        _add_alias(alias, config)
    elif kind == "mariadb":
        admin(kind, f"CREATE DATABASE {namespace} CHARACTER SET utf8mb4")
        _drops.append(lambda: admin(kind, f"DROP DATABASE IF EXISTS {namespace}"))
        _add_alias(alias, server_config(kind, namespace))
    else:
        raise ValueError(f"unknown database kind {kind!r}: sqlite, postgres or mariadb")
    call_command("migrate", "anarchon_django", database=alias, verbosity=0)
    connections[alias].close()  # backends open their own, in their threads
    return f"django://{alias}"


def unavailable(kind: str) -> str | None:
    """Why the store cannot be used here, or None."""
    try:
        import django  # noqa: F401
    except ImportError:
        return 'Django is not installed (pip install "anarchon[django]")'
    if kind == "sqlite":
        return None
    if not server_url(kind):
        return (f"{VARIABLES[kind]} is not set (run the tests with scripts/test.sh, or start "
                "servers with python scripts/servers.py start and source .servers.env)")
    try:
        admin(kind, "SELECT 1")
    except ImportError as exc:
        return f'the driver is not installed ({exc}): pip install "anarchon[postgres,mysql]"'
    except Exception as exc:
        return f"the server at {VARIABLES[kind]} does not answer: {exc}"
    return None


def drop(kind: str, namespaces: set[str]) -> None:
    """Drop what :func:`prepare` made for ``namespaces`` on ``kind`` (SQLite: nothing)."""
    for namespace in sorted(namespaces):
        if kind == "postgres":
            admin(kind, f"DROP SCHEMA IF EXISTS {namespace} CASCADE")
        elif kind == "mariadb":
            admin(kind, f"DROP DATABASE IF EXISTS {namespace}")


def drop_all() -> None:
    """Close this process's connections; drop the schemas and databases made here."""
    from django.conf import settings

    if settings.configured:
        from django.db import connections

        connections.close_all()
    while _drops:
        try:
            _drops.pop()()
        except Exception:  # best effort at exit
            pass
