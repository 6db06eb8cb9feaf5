"""Settings of the minimal test project (``tests.django``).

The environment picks the database so the same project serves pytest and the cluster
processes (``manage.py anarchon run``):

* ``ANARCHON_DJANGO_DB``: ``sqlite`` (default), ``postgres`` or ``mariadb``;
* ``ANARCHON_DJANGO_SQLITE``: the SQLite file (default: a file in a temporary folder);
* ``ANARCHON_DJANGO_PG``: the database name (default ``test``) on the rig's PostgreSQL
  server (``ANARCHON_POSTGRES_URL``);
* ``ANARCHON_DJANGO_MARIADB``: the MariaDB database (``mariadb``) on the server
  ``ANARCHON_MARIADB_URL`` names;
* ``ANARCHON_TEST_JOBS`` / ``ANARCHON_TEST_SCHEDULER`` / ``ANARCHON_TEST_OPTIONS``: JSON
  for ``ANARCHON["JOBS"]``, ``ANARCHON["SCHEDULER"]`` and ``ANARCHON["OPTIONS"]``;
* ``ANARCHON_TEST_AUTODISCOVER``: JSON for ``ANARCHON["AUTODISCOVER"]`` (default
  ``["jobs"]``); ``ANARCHON_TEST_LOG_LEVEL``: the ``anarchon`` logger's level (default
  ``WARNING``).
"""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any
from urllib.parse import unquote, urlsplit

SECRET_KEY = "anarchon-django-tests-not-secret"
DEBUG = False
ALLOWED_HOSTS = ["*"]
USE_TZ = True
TIME_ZONE = "UTC"
ROOT_URLCONF = "tests.django.urls"
DEFAULT_AUTO_FIELD = "django.db.models.AutoField"
STATIC_URL = "/static/"

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "anarchon_django",
    "tests.django.testapp",
]
try:  # the source rows of the import-celery-beat tests (a test-only dependency)
    import django_celery_beat  # noqa: F401

    INSTALLED_APPS.append("django_celery_beat")
except ImportError:
    pass

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]

TEMPLATES = [{
    "BACKEND": "django.template.backends.django.DjangoTemplates",
    "DIRS": [],
    "APP_DIRS": True,
    "OPTIONS": {"context_processors": [
        "django.template.context_processors.request",
        "django.contrib.auth.context_processors.auth",
        "django.contrib.messages.context_processors.messages",
    ]},
}]

_DB = os.environ.get("ANARCHON_DJANGO_DB", "sqlite")
if _DB == "postgres":
    # the rig's server (scripts/servers.py), never an assumed standard port
    _PG = urlsplit(os.environ["ANARCHON_POSTGRES_URL"])
    DATABASES: dict[str, Any] = {"default": {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": os.environ.get("ANARCHON_DJANGO_PG", "test"),
        "USER": _PG.username or "postgres",
        "PASSWORD": unquote(_PG.password or ""),
        "HOST": _PG.hostname,
        "PORT": str(_PG.port),
    }}
elif _DB == "mariadb":
    from tests.harness.django_stores import mysql_driver
    from tests.stores.django_support import server_config

    mysql_driver()  # PyMySQL, the "mysql" extra, as MySQLdb
    DATABASES = {"default": server_config("mariadb", os.environ["ANARCHON_DJANGO_MARIADB"])}
else:
    _FILE = os.environ.get("ANARCHON_DJANGO_SQLITE") or os.path.join(
        tempfile.mkdtemp(prefix="anarchon-django-"), "project.db")
    DATABASES = {"default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": _FILE,
        # a file, not memory: the anarchon store opens its own connection to it
        "TEST": {"NAME": _FILE + ".test"},
    }, "memory": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}}

ANARCHON: dict[str, Any] = {
    "BACKEND": os.environ.get("ANARCHON_TEST_BACKEND", "django"),
    "SCHEDULER": {"lease": "2s", "heartbeat": "0.3s", "jitter": "0.1s",
                  **json.loads(os.environ.get("ANARCHON_TEST_SCHEDULER", "{}"))},
    "JOBS": json.loads(os.environ.get("ANARCHON_TEST_JOBS", "{}")),
    "AUTODISCOVER": json.loads(os.environ.get("ANARCHON_TEST_AUTODISCOVER", '["jobs"]')),
    # the store table of a test's own, for manage.py processes a test starts
    **({"OPTIONS": json.loads(os.environ["ANARCHON_TEST_OPTIONS"])}
       if os.environ.get("ANARCHON_TEST_OPTIONS") else {}),
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {
        "anarchon": {"handlers": ["console"],
                     "level": os.environ.get("ANARCHON_TEST_LOG_LEVEL", "WARNING")},
        "anarchon_django": {"handlers": ["console"], "level": "INFO"},
    },
}
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]  # fast tests
