"""The Celery app: configured from Django settings (``CELERY_*``), beat on every node.

    celery -A project worker -l INFO
    celery -A project beat -S anarchon_celery:Scheduler -l INFO     # on every node

``CELERY_BEAT_SCHEDULER`` in settings already names ``anarchon_celery:Scheduler``, so
``-S`` is optional. Without a running Redis nothing here connects: the app is only built.
"""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")

app = Celery("project")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
