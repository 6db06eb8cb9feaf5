"""The ``anarchon`` command: inspecting a store and runtime control from a shell."""

from __future__ import annotations

from .commands import main

__all__ = ["main"]
