"""The format version every lease store records (``FormatStore.stored_format()``, which
``anarchon doctor`` shows): readable before ``open()``, creating nothing; once an instance
has used the namespace, the version this code needs."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from anarchon import AsyncScheduler, RunContext
from anarchon.backends import Backend
from anarchon.backends.capabilities import FormatStore


def test_the_namespace_records_the_format_this_code_needs(
        make_backend: Callable[[], Backend]) -> None:
    async def scenario() -> None:
        reader = make_backend()
        assert isinstance(reader, FormatStore), reader
        fresh = await reader.stored_format()  # never opened
        assert fresh.expected and fresh.where, fresh
        # a new namespace records nothing (the Django store's is migrated beforehand)
        assert fresh.stored in (None, fresh.expected), fresh
        assert fresh.usable == (fresh.stored is not None or fresh.created_on_use), fresh
        again = await reader.stored_format()
        assert again == fresh  # reading created nothing

        scheduler = AsyncScheduler(make_backend(), lease=2, heartbeat=0.3)

        def noop(ctx: RunContext) -> None:
            pass

        scheduler.every("fmt", "1h", noop)
        await scheduler.start()
        await scheduler.stop()
        used = await reader.stored_format()
        assert used.stored == used.expected == fresh.expected and used.usable, used
        await reader.close()

    asyncio.run(scenario())
