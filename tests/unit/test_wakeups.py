"""The wake-up channel helpers (anarchon/backends/wakeups.py), without a server."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from pathlib import Path

import pytest

from anarchon.backends import Backend, from_url, wakeups
from anarchon.backends.base import Wakeup
from anarchon.backends.wakeups import (
    changed_payload,
    keep_listening,
    parse_payload,
    released_payload,
    trigger_payload,
)
from tests.support import run, wait_until


def test_payloads_round_trip() -> None:
    assert parse_payload(released_payload("a:b", 1700000000000, 2)) == Wakeup(
        "released", "a:b", 1700000000000, 2)
    assert parse_payload(trigger_payload("job").encode()) == Wakeup("trigger", "job")
    assert parse_payload(changed_payload("é:{x}")) == Wakeup("changed", "é:{x}")


@pytest.mark.parametrize("raw", [
    "", "not json", "[]", '{"k": "released", "job": "x"}', '{"k": "trigger"}',
    '{"k": "trigger", "job": 3}', '{"k": "released", "job": "x", "slot": "1", "attempt": 1}',
    '{"k": "other", "job": "x"}', '{"k": "changed", "job": null}', b"\xff",
])
def test_foreign_messages_are_ignored(raw: str | bytes) -> None:
    assert parse_payload(raw) is None


def test_keep_listening_reports_up_down_and_reconnects(monkeypatch: pytest.MonkeyPatch
                                                       ) -> None:
    monkeypatch.setattr(wakeups, "RETRY_MIN", 0.01)
    got: list[Wakeup] = []
    opened: list[int] = []
    closed: list[int] = []

    async def stream() -> AsyncGenerator[str | bytes | None, None]:
        n = len(opened)
        opened.append(n)
        try:
            if n == 1:
                raise ConnectionError("refused")  # a failed reconnect: no "up"
            yield None
            yield "garbage"
            yield trigger_payload(f"j{n}")
            if n == 0:
                raise ConnectionError("killed")
            await asyncio.sleep(3600)
        finally:
            closed.append(n)

    def notify(wakeup: Wakeup) -> None:
        got.append(wakeup)
        if wakeup.kind == "trigger" and wakeup.name == "j0":
            raise RuntimeError("a listener bug must not end the channel")

    async def scenario() -> None:
        task = asyncio.ensure_future(keep_listening("test", stream, notify))
        await wait_until(lambda: Wakeup("trigger", "j2") in got, 5, "the third stream")
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    run(scenario())
    assert [w.kind for w in got] == ["up", "trigger", "down", "up", "trigger"]
    assert opened == [0, 1, 2] and sorted(closed) == [0, 1, 2]


def test_sqlite_has_no_wake_up_channel(tmp_path: Path) -> None:
    """SQLite keeps polling: its backend does not override ``Backend.watch``."""
    assert type(from_url(f"sqlite:///{tmp_path}/db.sqlite")).watch is Backend.watch
