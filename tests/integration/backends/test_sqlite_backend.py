"""SQLite specifics: URLs, the user's connection, foreign tables, no I/O before start."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

from anarchon import AsyncScheduler, IncompatibleStoreError, SqliteBackend, from_url
from anarchon.backends.base import JobSpec
from anarchon.backends.sqlite.wal import use_wal
from tests.support import run


def test_from_url_reads_path_and_options(tmp_path: Path) -> None:
    backend = from_url(f"sqlite:///{tmp_path}/x.db?table=svc_runs&busy_timeout=2s")
    assert isinstance(backend, SqliteBackend)
    assert (backend.database, backend.table, backend.busy_timeout) == (
        f"{tmp_path}/x.db", "svc_runs", 2.0)
    with pytest.raises(ValueError, match="colour"):
        from_url("sqlite:///x.db?colour=red")
    with pytest.raises(ValueError, match="scheme"):
        from_url("mysql://localhost/db")


@pytest.mark.parametrize("table", ["", "1abc", "a-b", "a;drop table x", "s.t", "x" * 49])
def test_bad_table_names_are_refused(table: str) -> None:
    with pytest.raises(ValueError, match="table"):
        SqliteBackend("x.db", table=table)


def test_nothing_touches_the_file_before_start(tmp_path: Path) -> None:
    path = tmp_path / "jobs.db"
    scheduler = AsyncScheduler(SqliteBackend(str(path)))
    scheduler.every("tick", "1s", lambda ctx: None)
    assert not path.exists()


def test_user_connection_is_used_and_never_closed(tmp_path: Path) -> None:
    connection = sqlite3.connect(tmp_path / "own.db", isolation_level=None,
                                 check_same_thread=False)

    async def scenario() -> None:
        backend = SqliteBackend(connection)
        await backend.open()
        await backend.register([JobSpec("job", "every", "every 1s")])
        await backend.close()

    run(scenario())
    assert connection.execute("SELECT name FROM anarchon_runs_jobs").fetchall() == [("job",)]
    connection.close()


def test_user_connection_must_be_in_autocommit(tmp_path: Path) -> None:
    connection = sqlite3.connect(tmp_path / "own.db")
    with pytest.raises(ValueError, match="isolation_level=None"):
        SqliteBackend(connection)
    connection.close()


def test_foreign_table_is_refused_and_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "app.db"
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE anarchon_runs (id INTEGER, note TEXT)")
        connection.execute("INSERT INTO anarchon_runs VALUES (1, 'mine')")

    with pytest.raises(IncompatibleStoreError, match="not created by anarchon"):
        run(SqliteBackend(str(path)).open())
    with sqlite3.connect(path) as connection:
        assert connection.execute("SELECT * FROM anarchon_runs").fetchall() == [(1, "mine")]


def test_other_format_version_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "app.db"

    async def create() -> None:
        backend = SqliteBackend(str(path))
        await backend.open()
        await backend.close()

    run(create())
    with sqlite3.connect(path) as connection:
        connection.execute("UPDATE anarchon_runs_meta SET value = '99'")
    with pytest.raises(IncompatibleStoreError, match="format version 99"):
        run(SqliteBackend(str(path)).open())


class _ReleasesOnBusy(sqlite3.Connection):
    """Lets ``holder`` commit the first time a statement finds the file locked."""

    holder: sqlite3.Connection | None = None
    busy = 0

    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
        try:
            return super().execute(sql, parameters)
        except sqlite3.OperationalError:
            self.busy += 1
            if self.holder is not None:
                self.holder.execute("COMMIT")
                self.holder = None
            raise


def _locked_file(path: Path) -> sqlite3.Connection:
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("CREATE TABLE t (x)")
    holder.execute("BEGIN EXCLUSIVE")
    return holder


def test_wal_switch_retries_while_the_file_is_locked(tmp_path: Path) -> None:
    holder = _locked_file(tmp_path / "x.db")
    connection = sqlite3.connect(tmp_path / "x.db", isolation_level=None, timeout=0,
                                 factory=_ReleasesOnBusy)
    assert isinstance(connection, _ReleasesOnBusy)
    connection.holder = holder
    use_wal(connection, timeout=5)
    assert connection.busy == 1
    assert connection.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    connection.close()
    holder.close()


def test_wal_switch_gives_up_after_its_timeout(tmp_path: Path) -> None:
    holder = _locked_file(tmp_path / "x.db")
    connection = sqlite3.connect(tmp_path / "x.db", isolation_level=None, timeout=0)
    started = time.monotonic()
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        use_wal(connection, timeout=0.2)
    assert time.monotonic() - started < 2
    connection.close()
    holder.execute("COMMIT")
    holder.close()


def test_blocked_event_loop_is_reported_with_the_job_name(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    async def blocker(ctx: object) -> None:
        time.sleep(0.8)  # noqa: ASYNC251 - blocking the loop is what is tested

    async def scenario() -> None:
        scheduler = AsyncScheduler(SqliteBackend(str(tmp_path / "x.db")), lease=2,
                                   heartbeat=0.2, jitter=0)
        scheduler.every("blocker", "0.5s", blocker)
        await scheduler.start()
        deadline = time.monotonic() + 5
        while "event loop blocked" not in caplog.text:
            assert time.monotonic() < deadline, "no warning"
            await asyncio.sleep(0.05)
        await scheduler.stop()

    with caplog.at_level(logging.WARNING, logger="anarchon"):
        run(scenario())
    assert "blocker" in caplog.text


def test_embedded_libsql_connection_holds_leases(tmp_path: Path) -> None:
    libsql = pytest.importorskip("libsql")
    from anarchon.backends.base import ClaimRequest, Finish, HeldRun

    connection = libsql.connect(str(tmp_path / "libsql.db"), isolation_level=None)

    async def scenario() -> None:
        backend = SqliteBackend(connection)
        await backend.open()
        await backend.register([JobSpec("job", "every", "every 1s")])
        claim = ClaimRequest(name="job", slot=1_000, owner="a", reason="scheduled",
                             lease_ms=30_000, max_late_ms=10**13, max_attempts=3,
                             overlap="skip")
        assert (await backend.claim(claim)).outcome == "won"
        assert (await backend.claim(ClaimRequest(**{**claim.__dict__, "owner": "b"}))
                ).outcome == "taken"
        beat = await backend.heartbeat("a", [HeldRun("job", 1_000, 1)], [], 30_000)
        assert not beat.lost
        assert await backend.finish(Finish("job", 1_000, "a", 1, "success", None, 10, None,
                                           3_600_000))
        records = await backend.history("job", 5)
        assert [(r.attempt, r.status) for r in records] == [(1, "success")]
        await backend.close()

    run(scenario())
