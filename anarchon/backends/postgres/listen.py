"""PostgreSQL wake-ups: ``LISTEN`` on the table's channel on a dedicated connection.

Hand-overs, trigger requests and control changes are announced by ``pg_notify`` in the
statement that writes them (see ``.queries`` and ``.control``); ``notifications()`` yields
their payloads.
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncGenerator
from typing import Any

ListenTarget = tuple[str, dict[str, Any]]


def wake_channel(schema: str | None, base: str) -> str:
    """The ``LISTEN``/``NOTIFY`` channel of a table namespace: ``[schema.]table_wake``, or
    a digest of it when that would exceed PostgreSQL's 63-byte identifiers."""
    plain = f"{schema}.{base}" if schema else base
    channel = f"{plain}_wake"
    if len(channel) > 63:
        digest = hashlib.blake2b(plain.encode(), digest_size=12).hexdigest()
        channel = f"anarchon_wake_{digest}"
    return channel


def listen_target(link: object, connect_timeout: float) -> ListenTarget | None:
    """Connection settings for the listening connection, taken from the pool of
    ``link``; ``None`` when there are none (a single connection was passed in)."""
    pool = getattr(link, "pool", None)
    conninfo = getattr(pool, "conninfo", None)
    if not isinstance(conninfo, str):
        return None
    kwargs: dict[str, Any] = dict(getattr(pool, "kwargs", None) or {})
    kwargs["autocommit"] = True
    kwargs.setdefault("connect_timeout", max(1, round(connect_timeout)))
    from psycopg.conninfo import conninfo_to_dict

    given = conninfo_to_dict(conninfo)
    # notice a dead peer without sending anything (the channel is otherwise silent)
    for key, value in (("keepalives", 1), ("keepalives_idle", 30),
                       ("keepalives_interval", 10), ("keepalives_count", 3)):
        if key not in given:
            kwargs.setdefault(key, value)
    return conninfo, kwargs


async def notifications(target: ListenTarget, listen: Any, channel: str
                        ) -> AsyncGenerator[str | bytes | None, None]:
    """Connect, run ``listen`` (the composed ``LISTEN`` statement), yield ``None`` once
    listening, then every payload sent on ``channel``; closes the connection on exit."""
    import psycopg

    conninfo, kwargs = target
    conn = await psycopg.AsyncConnection.connect(conninfo, **kwargs)
    try:
        await conn.execute(listen)
        yield None
        notes = conn.notifies()
        try:
            async for note in notes:
                if note.channel == channel:
                    yield note.payload
        finally:
            await notes.aclose()
    finally:
        await conn.close()
