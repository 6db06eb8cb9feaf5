"""The threads that send this process's messages: a few, whatever the number of runs.

The core runs each sync handler in a thread of its own (``anarchon.engine.runner``), and some
Dramatiq brokers keep their connection per thread: ``RabbitmqBroker.connection`` is
thread-local and stays open after its thread ends, so a message sent from each run's
thread would open one AMQP connection per message, until the process runs out of file
descriptors. Every send goes through [`send()`][anarchon_dramatiq.outbox.send] instead:
at most ``SEND_THREADS`` long-lived threads per process (one while sends do not overlap),
so at most that many connections per broker. A connection the server closed while idle
is opened again by the broker's own retry on the next send.

After a fork the child gets threads of its own (the parent's are not copied).
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

T = TypeVar("T")

#: the most threads (hence connections per thread-local broker) sending at once
SEND_THREADS = 4

Work = tuple[Callable[[], Any], "Future[Any]"]


class Outbox:
    """Up to ``size`` daemon threads taking sends from one queue; a new thread starts
    only when every thread is busy (like ``ThreadPoolExecutor``, but its threads never
    hold up the interpreter's exit behind a send that hangs)."""

    def __init__(self, size: int = SEND_THREADS) -> None:
        self.size = size
        self.pid = os.getpid()
        self._work: queue.SimpleQueue[Work] = queue.SimpleQueue()
        self._idle = threading.Semaphore(0)
        self._lock = threading.Lock()
        self.threads: list[threading.Thread] = []

    def send(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` on a send thread; return what it returned or raise what it raised.
        Blocks the calling (handler) thread meanwhile."""
        future: Future[T] = Future()
        self._work.put((fn, future))
        if not self._idle.acquire(blocking=False):
            with self._lock:
                if len(self.threads) < self.size:
                    thread = threading.Thread(target=self._serve, daemon=True,
                                              name=f"anarchon-dramatiq-send-{len(self.threads)}")
                    self.threads.append(thread)
                    thread.start()
        return future.result()

    def _serve(self) -> None:
        while True:
            fn, future = self._work.get()
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(fn())
                except BaseException as exc:  # handed to the sender, never lost
                    future.set_exception(exc)
            self._idle.release()


_lock = threading.Lock()
_outbox: Outbox | None = None


def outbox() -> Outbox:
    """This process's outbox (a new one after a fork: threads are not inherited)."""
    global _outbox
    with _lock:
        if _outbox is None or _outbox.pid != os.getpid():
            _outbox = Outbox()
        return _outbox


def send(fn: Callable[[], T]) -> T:
    """Run ``fn`` (a send) on one of this process's send threads (``Outbox.send``)."""
    return outbox().send(fn)


__all__ = ["SEND_THREADS", "Outbox", "outbox", "send"]
