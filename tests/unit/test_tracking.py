"""Trackers on a claim-only backend: no fenced running record, so a note writes nothing."""

from __future__ import annotations

import pytest

from anarchon import AsyncTracker, RunToken, Tracker
from tests.support import run
from tests.unit._doubles import MemoryClaimBackend

TOKEN = RunToken("job", 1_000, 1, "i0")


def test_note_on_a_claim_only_backend_is_false_and_writes_nothing() -> None:
    async def scenario() -> None:
        tracker = AsyncTracker(MemoryClaimBackend())
        assert await tracker.begin(TOKEN) is True  # nothing to renew
        assert await tracker.note(TOKEN, "retrying: OSError: flaky") is False
        assert await tracker.end(TOKEN, "success") is True
        await tracker.close()

    run(scenario())


def test_blocking_tracker_note_and_text_type() -> None:
    tracker = Tracker(MemoryClaimBackend())
    try:
        assert tracker.note(TOKEN, "retrying: x") is False
        with pytest.raises(TypeError, match="note text must be a str"):
            tracker.note(TOKEN, b"bytes")  # type: ignore[arg-type]
    finally:
        tracker.close()
