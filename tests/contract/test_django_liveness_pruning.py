"""The Django store's liveness records: a heartbeat deletes the records dead for long
(``KEEP_DEAD_MS`` past their expiry) and keeps the others, and it never waits for a
record another transaction holds. Deleting them with ``DELETE … WHERE expires < …``
scanned the whole table on InnoDB and waited for every held row, so two instances'
heartbeats, each holding its own record, deadlocked (errno 1213)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from anarchon.backends.base import Backend
from anarchon.backends.liveness import KEEP_DEAD_MS, InstanceInfo
from tests.conftest import only_lease_stores
from tests.support import run

#: how long the other transaction holds its record at most (seconds)
HOLD = 10.0


def info(instance_id: str) -> InstanceInfo:
    return InstanceInfo(instance_id, "host", 1, "1", 0, 2_000)


async def beat(backend: Any, instance_id: str) -> None:
    await backend.heartbeat_live(instance_id, [], [], 2_000, info(instance_id), 3_000)


@only_lease_stores("django-sqlite", "django-postgres", "django-mariadb")
def test_a_heartbeat_deletes_only_the_records_dead_for_long(
        make_backend: Callable[[], Backend]) -> None:
    async def scenario() -> None:
        backend: Any = make_backend()
        tables = backend.store.tables
        try:
            await beat(backend, "writer")
            now = await backend._thread.call(tables.now)
            await backend._thread.call(lambda: tables.instances().bulk_create([
                tables.instances().model(
                    instance=name, record=info(name).to_json(), last_seen=expires - 3_000,
                    expires=expires)
                for name, expires in (("long-dead", now - KEEP_DEAD_MS - 60_000),
                                      ("dead", now - KEEP_DEAD_MS + 60_000))]))
            await beat(backend, "writer")
            records = (await backend.instances()).records
            assert sorted(r.id for r in records) == ["dead", "writer"]
        finally:
            await backend.close()

    run(scenario())


@only_lease_stores("django-postgres", "django-mariadb")
def test_a_heartbeat_waits_for_no_other_instances_record(
        make_backend: Callable[[], Backend]) -> None:
    from django.db import connections, transaction

    async def scenario() -> None:
        backend: Any = make_backend()
        tables = backend.store.tables
        holds, release = threading.Event(), threading.Event()
        released: list[bool] = []  # True: by the test, False: the hold ran out
        errors: list[BaseException] = []

        def hold() -> None:
            """Another instance's beat under way: its record updated, not committed."""
            try:
                with transaction.atomic(using=backend.alias):
                    tables.instances().filter(instance="other").update(last_seen=0)
                    holds.set()
                    released.append(release.wait(HOLD))
            except BaseException as exc:  # reported by the test
                errors.append(exc)
                holds.set()
            finally:
                connections[backend.alias].close()

        try:
            await beat(backend, "other")
            holder = threading.Thread(target=hold, name="other-beat")
            holder.start()
            try:
                assert holds.wait(HOLD)
                await beat(backend, "mine")  # before the fix: waited for "other"'s row
            finally:
                release.set()
                holder.join(2 * HOLD)
            assert not errors, errors
            assert released == [True]
        finally:
            await backend.close()

    run(scenario())
