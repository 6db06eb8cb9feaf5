"""One row per slot of the ``tick`` job: the write is keyed by ``ctx.slot``."""

from __future__ import annotations

from django.db import models


class Tick(models.Model):
    """A slot the ``tick`` job handled, and which instance handled it."""

    slot: models.BigIntegerField[int, int] = models.BigIntegerField(unique=True)
    instance: models.CharField[str, str] = models.CharField(max_length=200)
    attempt: models.PositiveIntegerField[int, int] = models.PositiveIntegerField(default=1)
    created: models.DateTimeField[object, object] = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"slot {self.slot} by {self.instance} (attempt {self.attempt})"
