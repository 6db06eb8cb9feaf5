"""The lease backend contract (anarchon/backends/base.py), run against every lease store.

These call the backend directly: each rule of ``ClaimRequest`` and of fencing once.
"""

from __future__ import annotations

from anarchon.testing.claims import *  # noqa: F403
from anarchon.testing.records import *  # noqa: F403
