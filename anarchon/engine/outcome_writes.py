"""Durable outcomes: the finish of an attempt is written until the store answers it.

A finish that hits a store outage (an error, or no answer within ``call_bound()``) is
sent again with backoff, fenced on ``(owner, attempt)`` as every finish is, while the
lease keeper keeps the run's lease alive (the run stays ``finishing`` in the run table).
It ends when the store accepts it (True) or refuses it as stale (False), or when the
scheduler closes (None). A run that finished is never started again because its outcome
write met a blip.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from ..backends.base import Backend, Finish
from .aio import within

#: the longest one store call of a claim or a finish may take before it is given up
#: (also capped by the lease: see ``call_bound()``)
MAX_CALL_WAIT = 5.0
#: first and longest pause between two writes of the same finish: once the store is back,
#: the finish must land before a backup's takeover (deferred by a lease after an outage)
FIRST_RETRY, LONGEST_RETRY = 0.1, 0.5
#: how far back the history is read to learn whether a lost write was applied
HISTORY_LOOKBACK = 20


def call_bound(lease: float) -> float:
    """How long one claim or finish may wait for the store's answer: min(lease, 5 s)."""
    return min(lease, MAX_CALL_WAIT)


async def record_outcome(backend: Backend, send: Callable[[Finish], Awaitable[bool]],
                         finish: Finish, bound: float,
                         on_error: Callable[[BaseException], None],
                         closed: Callable[[], bool]) -> bool | None:
    """Write ``finish`` with ``send`` until the store accepts (True) or refuses (False) it.

    Each write waits at most ``bound`` seconds; a failed one is reported to ``on_error``
    and retried with backoff. After a write whose answer was lost, a refusal may be our
    own earlier write having been applied: the job's history tells. ``None``: the
    scheduler closed first.
    """
    delay, unsure = FIRST_RETRY, False
    while not closed():
        try:
            recorded = await within(send(finish), bound)
            if not recorded and unsure:
                recorded = await within(_applied_before(backend, finish), bound)
        except Exception as exc:
            on_error(exc if not isinstance(exc, asyncio.TimeoutError) else TimeoutError(
                f"finish of {finish.name!r} slot {finish.slot} not answered within "
                f"{bound:g}s"))
            unsure = True
            await asyncio.sleep(delay)
            delay = min(delay * 2, LONGEST_RETRY)
            continue
        return recorded
    return None


async def _applied_before(backend: Backend, finish: Finish) -> bool:
    """True if the store shows attempt ``finish.attempt`` ended by ``finish.owner``."""
    for record in await backend.history(finish.name, HISTORY_LOOKBACK):
        if (record.slot == finish.slot and record.attempt == finish.attempt
                and record.instance_id == finish.owner):
            return record.status == finish.status
    return False
