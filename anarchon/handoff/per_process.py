"""One object per process, safe across ``fork()``: what a worker's tracker needs.

Task-queue workers fork (Celery's prefork pool, Dramatiq's worker processes). A tracker
built in the parent holds threads and sockets that belong to the parent: a child must
build its own on first use and must never close the parent's.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class PerProcess(Generic[T]):
    """Holds what ``build()`` made in this process; a forked child gets a new one on its
    first [`get()`][anarchon.handoff.per_process.PerProcess.get]; ``close()`` closes it only
    in the process that built it."""

    def __init__(self, build: Callable[[], T], close: Callable[[T], None]) -> None:
        self._build = build
        self._close = close
        self._lock = threading.Lock()
        self._value: T | None = None
        self._pid = 0

    def get(self) -> T:
        """This process's object (built on first use, again after a fork)."""
        with self._lock:
            if self._value is None or self._pid != os.getpid():
                self._value = self._build()
                self._pid = os.getpid()
            return self._value

    def close(self) -> None:
        """Close this process's object, if it built one."""
        with self._lock:
            value, self._value = self._value, None
        if value is not None and self._pid == os.getpid():
            self._close(value)

    def after_fork(self) -> None:
        """In a forked child: forget the parent's object (its threads and sockets belong to
        the parent; closing them here would break the parent's) and its lock."""
        self._lock = threading.Lock()
        self._value = None
        self._pid = 0


__all__ = ["PerProcess"]
