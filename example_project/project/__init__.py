"""The example project. Importing the Celery app here makes ``@shared_task`` use it."""

from __future__ import annotations

from .celery import app as celery_app

__all__ = ["celery_app"]
