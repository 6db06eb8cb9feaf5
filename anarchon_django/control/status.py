"""The status of the configured store (``anarchon.control.status``) for
``manage.py anarchon status`` and the admin's Instances page: the instances with their
liveness, the runs they hold, every job's next slot, paused jobs, the last failures; and
its diagnosis for ``manage.py anarchon doctor`` (``anarchon.cli.ops_commands``)."""

from __future__ import annotations

import asyncio

from anarchon.cli.ops_commands import Line, doctor
from anarchon.control.status import Status, read_status
from anarchon_django.settings.backend import build_backend
from anarchon_django.settings.conf import get_settings


def read() -> Status:
    """Read the status from the store ``ANARCHON`` names (a backend of its own, closed
    after)."""
    return asyncio.run(read_status(build_backend(get_settings())))


def diagnose() -> list[Line]:
    """``anarchon doctor``'s checks of the store ``ANARCHON`` names (its own backend)."""
    return asyncio.run(doctor(build_backend(get_settings())))


__all__ = ["diagnose", "read"]
