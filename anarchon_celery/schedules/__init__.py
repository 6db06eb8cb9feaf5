"""Celery schedules as anarchon schedules: crontab, solar, conversion, timing."""
