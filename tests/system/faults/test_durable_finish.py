"""A finish that meets a store outage is retried until the store records it, on every
lease store (issue 34, item 4).

A store of the test's own: Redis/Valkey (append-only file, ``appendfsync always``,
``kill -9``), PostgreSQL (a throwaway cluster, ``pg_ctl stop -m immediate``), SQLite
(another connection holding the write lock), and the Django store on a throwaway
PostgreSQL and on a SQLite file. Two schedulers (lease 3 s, heartbeat 0.5 s) share one
``at`` job. The winner's handler returns while the store is away; it comes back 4.5 s
later (longer than the lease); the handler returns 1.5 s into the outage, before its lease
would have lapsed. The outcome must be recorded as attempt 1's success once
the store answers, and no attempt 2 may start on either instance (docs/guarantees.md,
"the store is down when a run ends").
"""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

import anarchon
from anarchon import Event
from tests.harness.servers import Outage, SqliteLock, throwaway
from tests.system.faults.conftest import missing

#: the default lease : heartbeat ratio (30 s : 5 s); the outage outlasts the lease
LEASE, HEARTBEAT, OUTAGE, DEADLINE = 3.0, 0.5, 4.5, 20.0
#: the handler returns this long after the store went away (before its lease lapses)
RETURNS_AFTER = 1.5


KINDS = ("redis", "valkey", "postgres", "sqlite", "django-postgres", "django-sqlite")


def _store(kind: str, tmp_path: Path, namespace: str) -> Outage:
    """The store of ``kind`` the test stops, with ``url`` for ``anarchon.from_url``."""
    sqlite_url = f"sqlite:///{tmp_path / 'jobs.db'}?table=t_{namespace}"
    base = kind.removeprefix("django-")
    if base == "sqlite" and kind == "django-sqlite":
        server: Outage = SqliteLock(f"sqlite:///{tmp_path / 'django.db'}")
    else:
        server = throwaway(base, tmp_path, namespace, sqlite_url, aof=True, sigkill=True)
    if kind.startswith("django-"):
        server.url = django_store(base, server.url, namespace)
    return server


def django_store(base: str, url: str, namespace: str) -> str:
    """A migrated Django store on the test's own database; its ``django://`` URL."""
    from tests.harness.django_stores import _add_alias, configure

    configure()
    from django.core.management import call_command
    from django.db import connections

    alias = f"durable_{namespace}"
    if base == "sqlite":
        config: dict[str, Any] = {"ENGINE": "django.db.backends.sqlite3",
                                  "NAME": url.split("sqlite:///", 1)[1]}
    else:
        parts = urlsplit(url)
        config = {"ENGINE": "django.db.backends.postgresql",
                  "NAME": parts.path.lstrip("/"), "USER": parts.username or "",
                  "PASSWORD": "", "HOST": parts.hostname, "PORT": str(parts.port)}
    _add_alias(alias, config)
    call_command("migrate", "anarchon_django", database=alias, verbosity=0)
    connections[alias].close()
    return f"django://{alias}"


@pytest.mark.parametrize("kind", KINDS)
def test_a_finish_during_an_outage_is_recorded_when_the_store_returns(
        kind: str, tmp_path: Path, namespace: str) -> None:
    try:
        server = _store(kind, tmp_path, namespace)
    except FileNotFoundError as exc:
        missing(str(exc))
    running, release = threading.Event(), threading.Event()
    starts: list[Event] = []

    def work(ctx: anarchon.RunContext) -> None:
        running.set()
        assert release.wait(DEADLINE), "the test never released the handler"

    async def main() -> list[anarchon.RunRecord]:
        when = time.time() + 0.5
        schedulers = [anarchon.AsyncScheduler(anarchon.from_url(server.url), lease=LEASE,
                                              heartbeat=HEARTBEAT) for _ in range(2)]
        for scheduler in schedulers:
            scheduler.at("work", when, work, max_late=60)
            scheduler.on("start", starts.append)
            await scheduler.start()
        try:
            assert await asyncio.to_thread(running.wait, DEADLINE), "work never started"
            server.down()  # kill -9 while the handler runs
            # it returns while the store is away, renewals failing for a while already,
            # but before its lease would have lapsed: the finish fails
            await asyncio.sleep(RETURNS_AFTER)
            release.set()
            await asyncio.sleep(OUTAGE - RETURNS_AFTER)
            server.up()
            deadline = time.monotonic() + DEADLINE
            while True:
                records = await schedulers[0].history("work", 10)
                if any(r.status != "running" for r in records):
                    break
                assert time.monotonic() < deadline, f"outcome never recorded: {records}"
                await asyncio.sleep(0.1)
            # a takeover would need a lapsed lease and a heartbeat to see it
            await asyncio.sleep(LEASE + 3 * HEARTBEAT)
            return await schedulers[0].history("work", 10)
        finally:
            for scheduler in schedulers:
                await scheduler.stop(timeout=2)

    try:
        records = asyncio.run(main())
    finally:
        server.close()
    assert [(r.attempt, r.status) for r in records] == [(1, "success")]
    assert [e.attempt for e in starts] == [1]
