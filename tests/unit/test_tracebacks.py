"""Failed attempts keep their full traceback in history, bounded with the end kept."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from anarchon import AsyncScheduler, RunContext, SqliteBackend
from anarchon.cli.commands import main as cli
from anarchon.tracebacks import MAX_ERROR, describe, summary


def _raise_chained() -> BaseException:
    try:
        try:
            {"a": 1}["missing-key"]
        except KeyError as inner:
            raise RuntimeError("lookup failed") from inner
    except RuntimeError as outer:
        return outer
    raise AssertionError("unreachable")


def test_the_whole_chain_is_kept_and_the_last_line_is_the_summary() -> None:
    text = describe(_raise_chained())
    assert text is not None and text.startswith("Traceback (most recent call last)")
    assert "KeyError: 'missing-key'" in text and "direct cause" in text
    assert "_raise_chained" in text
    assert summary(text) == "RuntimeError: lookup failed"
    assert describe(None) is None and summary(None) == ""


def test_a_long_traceback_keeps_its_end() -> None:
    error: BaseException | None = None
    for n in range(300):  # a chain of 300 exceptions, each a block of its own
        try:
            raise ValueError(f"step {n}: " + "x" * 80) from error
        except ValueError as exc:
            error = exc
    text = describe(error)
    assert text is not None and len(text) == MAX_ERROR
    assert text.startswith("[… the first ") and "characters of the traceback were cut" in text
    assert "step 0:" not in text and summary(text).startswith("ValueError: step 299: xxx")


def test_history_and_the_cli_show_the_traceback(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    database = str(tmp_path / "tb.db")

    def broken(ctx: RunContext) -> None:
        raise KeyError("missing-key")

    async def fail_once() -> str | None:
        scheduler = AsyncScheduler(SqliteBackend(database))
        scheduler.every("broken", "1h", broken)
        await scheduler.start()  # registers the job (the CLI refuses unknown ones)
        record = await scheduler.run_now("broken")
        stored = (await scheduler.history("broken", 1))[0].error
        await scheduler.stop()
        assert stored == record.error
        return stored

    stored = asyncio.run(fail_once())
    assert stored is not None and "in broken" in stored
    assert summary(stored) == "KeyError: 'missing-key'"
    assert cli(["history", "broken", "--backend", f"sqlite:///{database}"]) == 0
    plain = capsys.readouterr().out
    assert "KeyError: 'missing-key'" in plain and "Traceback" not in plain
    assert cli(["history", "broken", "--backend", f"sqlite:///{database}", "--verbose"]) == 0
    assert "Traceback (most recent call last)" in capsys.readouterr().out
