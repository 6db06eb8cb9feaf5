"""RabbitMQ claim-only backend: ``RabbitMQBackend(url="amqp://localhost", prefix="cron.",
slot_ttl="5m")``. Needs ``pip install "anarchon[rabbitmq]"`` (aio-pika)."""

from __future__ import annotations

from .backend import RabbitMQBackend

__all__ = ["RabbitMQBackend"]
