"""A failed send retried with backoff while the slot is within ``max_late``.

A broker that is briefly down (a restart, a failover) must not lose the slot: the send is
retried (0.5 s, then doubling up to 10 s) until ``slot + max_late``, after which the last
error is raised and the run recorded as a failure (never silently lost). A run aborted
meanwhile (lease lost, scheduler stopping) stops retrying with
[`anarchon.Aborted`][anarchon.Aborted].
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

from ..context import RunContext
from ..errors import Aborted

T = TypeVar("T")

#: the first pause between sends, doubled after each failure up to ``MAX_RETRY``
FIRST_RETRY, MAX_RETRY = 0.5, 10.0


def send_until_late(ctx: RunContext, send: Callable[[], T], max_late: float,
                    logger: logging.Logger, what: str, verb: str = "send",
                    refused: Callable[[Aborted], None] | None = None,
                    give_up_log: bool = True) -> T:
    """``send()``, retried on any error until ``ctx.slot`` + ``max_late`` seconds;
    ``what`` names the job in the log lines (``"beat entry 'x'"``), ``verb`` the action.
    [`anarchon.Aborted`][anarchon.Aborted] from ``send()`` (the lease fence refused) is
    never retried: ``refused(exc)`` is called, then it is raised. ``give_up_log``: log
    the last failure at ERROR here (off when the caller logs it itself)."""
    deadline = ctx.slot / 1000 + max_late
    delay = FIRST_RETRY
    while True:
        try:
            return send()
        except Aborted as exc:
            if refused is not None:
                refused(exc)
            raise
        except Exception as exc:
            if time.time() + delay > deadline:
                if give_up_log:
                    logger.error("%s slot %s: %s failed, slot is now past max_late: %s",
                                 what, ctx.slot, verb, exc)
                raise
            logger.warning("%s slot %s: %s failed (%s); retrying in %.1fs", what, ctx.slot,
                           verb, exc, delay)
            if ctx.signal.wait(delay):
                ctx.signal.raise_if_aborted()
            delay = min(delay * 2, MAX_RETRY)


__all__ = ["FIRST_RETRY", "MAX_RETRY", "send_until_late"]
