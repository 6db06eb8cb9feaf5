"""Shared parts of the backends' wake-up channels (see
[`Backend.watch()`][anarchon.backends.base.Backend.watch]).

A message is a small JSON object: ``{"k": "released", "job": …, "slot": …, "attempt": …}``,
``{"k": "trigger", "job": …}`` or ``{"k": "changed", "job": …}``. Anything else on the
channel is ignored, so a malformed or foreign message can at worst cost nothing; the
store stays the only judge of who runs what (a wake-up only makes an instance ask sooner).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncGenerator, Callable
from typing import Any

from .base import Wakeup

logger = logging.getLogger("anarchon")

#: first and largest pause between reconnection attempts (seconds)
RETRY_MIN, RETRY_MAX = 0.2, 10.0


def released_payload(name: str, slot: int, attempt: int) -> str:
    """The message announcing a hand-over."""
    return json.dumps({"k": "released", "job": name, "slot": slot, "attempt": attempt})


def trigger_payload(name: str) -> str:
    """The message announcing a trigger() request."""
    return json.dumps({"k": "trigger", "job": name})


def changed_payload(name: str) -> str:
    """The message announcing a change of a job's control record."""
    return json.dumps({"k": "changed", "job": name})


def parse_payload(raw: str | bytes) -> Wakeup | None:
    """The ``Wakeup`` in a channel message, or None if it is not one
    of ours."""
    try:
        data: Any = json.loads(raw)
        kind = data["k"]
        name = data["job"]
        if not isinstance(name, str):
            return None
        if kind == "released":
            slot, attempt = data["slot"], data["attempt"]
            if isinstance(slot, int) and isinstance(attempt, int):
                return Wakeup("released", name, slot, attempt)
        elif kind == "trigger":
            return Wakeup("trigger", name)
        elif kind == "changed":
            return Wakeup("changed", name)
    except (ValueError, TypeError, KeyError):
        pass
    return None


async def keep_listening(what: str,
                         stream: Callable[[], AsyncGenerator[str | bytes | None, None]],
                         notify: Callable[[Wakeup], None]) -> None:
    """Run ``stream`` (connect, subscribe, then yield messages) until cancelled.

    ``stream`` yields ``None`` once it is subscribed, then raw messages; it closes its
    connection when closed. Any error (or the stream ending) means the channel is lost:
    ``notify`` gets ``down``, and the stream is reopened after a growing pause.
    """
    delay = RETRY_MIN
    while True:
        up = False
        messages = stream()
        try:
            async for raw in messages:
                if raw is None:
                    up = True
                    delay = RETRY_MIN
                    _deliver(notify, Wakeup("up"))
                    continue
                wakeup = parse_payload(raw)
                if wakeup is not None:
                    _deliver(notify, wakeup)
            logger.debug("%s wake-up channel closed", what)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # any failure: fall back to polling, then reconnect
            logger.debug("%s wake-up channel lost: %s: %s", what, type(exc).__name__, exc)
        finally:
            try:
                await messages.aclose()
            except Exception as exc:  # closing a broken connection may fail too
                logger.debug("%s wake-up channel close failed: %s", what, exc)
        if up:
            _deliver(notify, Wakeup("down"))
        await asyncio.sleep(delay)
        delay = min(delay * 2, RETRY_MAX)


def _deliver(notify: Callable[[Wakeup], None], wakeup: Wakeup) -> None:
    try:
        notify(wakeup)
    except Exception:  # a listener bug must not kill the channel
        logger.exception("anarchon wake-up listener failed on %s", wakeup)
