"""The Django store on PostgreSQL: a terminated session is no outage (issue 34, item 3).

The backend's own connection (its ORM thread's) is terminated with
``pg_terminate_backend``; the next claim and read succeed on a new connection, with no
``StoreError``."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from anarchon.backends.base import Backend, JobSpec
from anarchon.testing.claims import request
from tests.conftest import only_lease_stores
from tests.support import run


@only_lease_stores("django-postgres")
def test_a_terminated_session_is_replaced_without_an_error(
        make_backend: Callable[[], Backend]) -> None:
    from django.db import connections

    from tests.harness.django_stores import admin

    async def scenario() -> None:
        backend: Any = make_backend()
        await backend.open()
        await backend.register([JobSpec("job", "every", "every 1s")])
        for round_ in range(3):
            def pid() -> int:
                with connections[backend.alias].cursor() as cursor:
                    cursor.execute("SELECT pg_backend_pid()")
                    return int(cursor.fetchone()[0])

            session = await backend._thread.call(pid)
            admin("postgres", f"SELECT pg_terminate_backend({session})")
            slot = int(time.time() * 1000) + round_
            won = await backend.claim(request("job", slot, f"i{round_}", overlap="all"))
            assert won.outcome == "won", won
            assert await backend._thread.call(pid) != session  # a new connection
        assert len(await backend.history("job", 10)) == 3
        await backend.close()

    run(scenario())
