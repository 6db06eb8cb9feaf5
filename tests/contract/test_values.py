"""Shared values (``read_value`` / ``swap_value`` in anarchon/backends/base.py) on every
lease store: compare-and-set with exactly one winner among instances that read alike."""

from __future__ import annotations

from anarchon.testing.values import *  # noqa: F403
