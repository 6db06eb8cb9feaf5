"""Settings of the ``manage.py anarchon run`` metrics test: the store is
``$ANARCHON_TEST_STORE``, the jobs those of ``metrics_jobs``, metrics on."""

from __future__ import annotations

import os
from typing import Any

SECRET_KEY = "observability-tests"
USE_TZ = True
INSTALLED_APPS = ["django.contrib.contenttypes", "django.contrib.auth", "anarchon_django"]
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3",
                         "NAME": os.environ.get("ANARCHON_TEST_DB", ":memory:")}}
ANARCHON: dict[str, Any] = {
    "BACKEND": os.environ.get("ANARCHON_TEST_STORE", "sqlite:///jobs.db"),
    "SCHEDULER": {"lease": "3s", "heartbeat": "0.5s"},
    "METRICS": True,
    "AUTODISCOVER": [],
    "JOBS": {name: {"callable": f"tests.system.observability.metrics_jobs.{name}", "every": "1s"}
             for name in ("ok", "boom", "slow")},
}
