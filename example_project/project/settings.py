"""Settings of the anarchon example project.

Environment overrides (all optional): ``EXAMPLE_DB`` (the SQLite file, default
``db.sqlite3`` beside ``manage.py``), ``EXAMPLE_ANARCHON_SCHEDULER`` (JSON merged into
``ANARCHON["SCHEDULER"]``), ``EXAMPLE_ANARCHON_BACKEND`` (a store URL instead of the
project database), ``REDIS_URL`` (Celery and Dramatiq broker, default
``redis://localhost:6379/0``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from celery.schedules import crontab

BASE_DIR = Path(__file__).resolve().parent.parent

SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "example-project-not-secret")
DEBUG = True
ALLOWED_HOSTS = ["localhost", "127.0.0.1", "testserver"]
USE_TZ = True
TIME_ZONE = "Europe/Berlin"
ROOT_URLCONF = "project.urls"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
STATIC_URL = "/static/"

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "anarchon_django",
    "shop",
]

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

DATABASES = {"default": {
    "ENGINE": "django.db.backends.sqlite3",
    "NAME": os.environ.get("EXAMPLE_DB") or str(BASE_DIR / "db.sqlite3"),
}}

# anarchon: the default "django" backend keeps runs in the project's own database, so
# `manage.py migrate && manage.py anarchon run` works with no server. Short lease and
# heartbeat so a `kill -9` is visible within seconds (production: the defaults, 30 s / 5 s).
ANARCHON: dict[str, Any] = {
    "BACKEND": os.environ.get("EXAMPLE_ANARCHON_BACKEND", "django"),
    "SCHEDULER": {"lease": "6s", "heartbeat": "1s", "jitter": "300ms",
                  **json.loads(os.environ.get("EXAMPLE_ANARCHON_SCHEDULER", "{}"))},
}

# Celery: beat runs on every node; only the slot winner publishes.
REDIS_URL = os.environ.get("REDIS_URL", "redis://localhost:6379/0")
CELERY_BROKER_URL = REDIS_URL
CELERY_TIMEZONE = TIME_ZONE
CELERY_BEAT_SCHEDULER = "anarchon_celery:Scheduler"
CELERY_ANARCHON_BACKEND = "sqlite:///" + DATABASES["default"]["NAME"] + "?table=celery_beat_runs"
CELERY_BEAT_SCHEDULE = {
    "send-digest": {"task": "shop.tasks.send_digest", "schedule": crontab(minute=0, hour=8),
                    "options": {"anarchon": {"max_attempts": 1}}},
    "ping": {"task": "shop.tasks.ping", "schedule": 30.0},
}

# Dramatiq: see project/dramatiq_setup.py and shop/actors.py.
DRAMATIQ_BROKER_URL = REDIS_URL

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {
        "anarchon": {"handlers": ["console"], "level": "WARNING"},
        # each scheduler's wins ("sent message …") and anything it skips or refuses
        "anarchon.dramatiq": {"handlers": ["console"], "level": "INFO", "propagate": False},
        "anarchon_django": {"handlers": ["console"], "level": "INFO"},
    },
}
