"""Moved to ``anarchon.backends.broker_records`` (shared by RabbitMQ and NATS); this
import is kept for this release."""

from ..broker_records import FORMAT, Entry, Remembered, merge, scheduled_key

__all__ = ["FORMAT", "Entry", "Remembered", "merge", "scheduled_key"]
