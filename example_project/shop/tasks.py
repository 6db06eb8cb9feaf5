"""Celery tasks published by ``anarchon_celery`` beats (see ``CELERY_BEAT_SCHEDULE``)."""

from __future__ import annotations

from typing import Any

from celery import shared_task


@shared_task(bind=True)
def send_digest(self: Any) -> str:
    """The slot arrives as a message header: key the digest by it."""
    slot = (self.request.headers or {}).get("anarchon_slot")
    return f"digest for slot {slot}"


@shared_task
def ping() -> str:
    return "pong"
