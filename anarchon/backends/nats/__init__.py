"""NATS JetStream claim-only backend: ``NatsBackend(servers="nats://localhost:4222",
stream="CRON", prefix="cron.", duplicate_window="5m", history_size=1000, replicas=1)``.
Needs ``pip install "anarchon[nats]"`` (nats-py)."""

from __future__ import annotations

from .backend import NatsBackend

__all__ = ["NatsBackend"]
