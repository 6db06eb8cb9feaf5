"""A daemon thread that a beat starts once and stops on close."""

from __future__ import annotations

import threading


class BackgroundLoop:
    """Runs ``_run`` in a daemon thread named ``thread_name``; ``_stop`` ends it."""

    thread_name = "anarchon-celery"

    def __init__(self) -> None:
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _run(self) -> None:
        raise NotImplementedError

    def start(self) -> None:
        """Start the thread (once)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, daemon=True,
                                            name=self.thread_name)
            self._thread.start()

    def stop(self) -> None:
        """Ask the loop to end and wait for it (up to 10 s)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)


__all__ = ["BackgroundLoop"]
