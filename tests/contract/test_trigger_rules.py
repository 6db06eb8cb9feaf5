"""The trigger contract (``anarchon/backends/trigger_rules.py``) on every lease store: one
manual run at a time per job (atomic against racing requesters), ``overlap="allow"``,
requests that expire unrun, and ``forget()``."""

from __future__ import annotations

import pytest

from anarchon import AsyncScheduler
from anarchon.backends import from_url
from anarchon.testing.triggers import *  # noqa: F403
from tests.support import run


def test_a_claim_only_store_refuses_forget_clearly() -> None:
    backend = from_url("redis://127.0.0.1:1/0?strategy=stream-id&lab=1")
    with pytest.raises(NotImplementedError, match="cannot forget a job"):
        run(AsyncScheduler(backend).forget("job"))
