"""Processes opening one new SQLite file together (real processes: tests/system)."""

from __future__ import annotations

import multiprocessing
from pathlib import Path
from typing import Any

from anarchon import SqliteBackend
from tests.support import run


def _open_at_barrier(path: str, barrier: Any, answers: Any) -> None:
    barrier.wait()
    try:
        run(SqliteBackend(path).open())
        answers.put("opened")
    except Exception as exc:  # reported to the test, which names it
        answers.put(repr(exc))


def test_processes_opening_a_new_file_together_all_open(tmp_path: Path) -> None:
    # Two processes switching a new file to WAL at once: one used to get "database is
    # locked" at once, busy timeout or not (a third of trials on this machine).
    context = multiprocessing.get_context("fork")
    for trial in range(20):
        path = str(tmp_path / f"new-{trial}.db")
        barrier, answers = context.Barrier(2), context.Queue()
        processes = [context.Process(target=_open_at_barrier, args=(path, barrier, answers))
                     for _ in range(2)]
        for process in processes:
            process.start()
        results = [answers.get(timeout=30) for _ in processes]
        for process in processes:
            process.join(30)
        assert results == ["opened", "opened"], f"trial {trial}: {results}"
