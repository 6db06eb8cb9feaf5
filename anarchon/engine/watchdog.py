"""A watchdog thread that notices the event loop has stopped turning, while it happens.

An ``async def`` handler that blocks (``time.sleep``, CPU work, a blocking driver) stops
every coroutine of the loop, the warnings of the loop's own lag watch included: those
come only once it is over. This thread, which no handler can block, logs one WARNING per
stall as soon as the loop has not turned for longer than a heartbeat, naming the async
jobs that may be blocking it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

logger = logging.getLogger("anarchon")


class LoopWatchdog:
    """Warns once per stall when `turned()` has not been called for over ``heartbeat``.

    ``busy()`` (called on the watchdog's thread: it must only read) names the async jobs
    running; ``turned()`` is called by a coroutine on the watched loop at every step.
    """

    def __init__(self, heartbeat: float, busy: Callable[[], list[str]],
                 name: str = "anarchon-watchdog") -> None:
        self.heartbeat = heartbeat
        self._busy = busy
        self._last_turn = time.monotonic()
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._watch, name=name, daemon=True)

    def start(self) -> None:
        self._last_turn = time.monotonic()
        self._thread.start()

    def stop(self) -> None:
        """Stop watching (returns at once; the thread ends within a quarter heartbeat)."""
        self._stopped.set()

    def turned(self) -> None:
        """The loop is turning (a stall, if any, has ended)."""
        self._last_turn = time.monotonic()

    def _watch(self) -> None:
        warned_for = None  # the turn the current stall started after
        while not self._stopped.wait(self.heartbeat / 4):
            last = self._last_turn
            stalled = time.monotonic() - last
            if stalled <= self.heartbeat or warned_for == last:
                continue
            warned_for = last
            try:
                busy = ", ".join(self._busy()) or "none"
            except RuntimeError:  # the table changed while being read: name none
                busy = "unknown"
            logger.warning("event loop blocked for %.1fs so far (heartbeat %gs): async "
                           "job(s) running: %s — use await or a thread for blocking work",
                           stalled, self.heartbeat, busy)
