"""The store's side of runtime control (``anarchon/backends/control.py``) on every lease
store: compare-and-set of control records, the generation, the change log, handler
offers, and the version fence in claims."""

from __future__ import annotations

from anarchon.testing.control import *  # noqa: F403
