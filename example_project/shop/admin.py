"""The ticks in the admin, beside anarchon's run history."""

from __future__ import annotations

from django.contrib import admin

from .models import Tick


@admin.register(Tick)
class TickAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ("slot", "instance", "attempt", "created")
