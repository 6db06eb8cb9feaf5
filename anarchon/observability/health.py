"""Is this process's scheduler well? ``/healthz`` on the metrics port, the liveness file
and the ``anarchon_instances_alive`` gauge.

A scheduler is *healthy* while it runs and the store confirmed its last heartbeat less
than one lease ago (a scheduler without leases, on a claim-only store: while it runs).
The liveness file (``liveness_file=`` or ``ANARCHON_LIVENESS_FILE``) is touched after each
confirmed heartbeat, so its mtime is at most a heartbeat old on a healthy instance.
``anarchon_instances_alive`` counts the live records of the store (see
``anarchon.backends.liveness``), read at scrape time on the lease keeper's loop and
kept for one heartbeat: scrapes make at most one store call per heartbeat and claims none.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from socketserver import ThreadingMixIn
from typing import TYPE_CHECKING, Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

if TYPE_CHECKING:
    from ..engine.lease_keeper import LeaseKeeper
    from ..engine.runtime import Runtime

logger = logging.getLogger("anarchon")

ALIVE = "anarchon_instances_alive"
_ALIVE_HELP = ("Instances alive in the store (liveness records not expired, by the "
               "store's clock), as this process reads them")
#: how long a scrape waits for the store's records, seconds
READ_TIMEOUT = 2.0

_lock = threading.Lock()
_running: list[Health] = []


def liveness_path(value: str | os.PathLike[str] | None) -> str | None:
    """The liveness file given, else ``ANARCHON_LIVENESS_FILE``; ``None``: none."""
    if value is None:
        value = os.environ.get("ANARCHON_LIVENESS_FILE") or None
    if value is None:
        return None
    if not isinstance(value, (str, os.PathLike)) or not os.fspath(value):
        raise TypeError(f"liveness_file must be a path, got {value!r}")
    return os.fspath(value)


class Health:
    """The health of one scheduler (its ``runtime`` and, once started, its lease
    ``keeper``) and its liveness file (``path``)."""

    def __init__(self, runtime: Runtime, keeper: Callable[[], LeaseKeeper | None],
                 path: str | None) -> None:
        self.runtime = runtime
        self.keeper = keeper
        self.path = path
        self.started_at = time.monotonic()
        self._warned = False

    def started(self) -> None:
        """The scheduler started: follow its keeper's beats; /healthz sees it."""
        self.started_at = time.monotonic()
        keeper = self.keeper()
        if keeper is not None:
            keeper.on_beat = self.beaten
            if keeper.beaten_at is not None:
                self.beaten()
        elif self.path is not None:
            self.beaten()  # no heartbeat on a claim-only store: touched at start only
        with _lock:
            _running.append(self)

    def stopped(self) -> None:
        with _lock:
            if self in _running:
                _running.remove(self)

    def beaten(self) -> None:
        """A heartbeat was confirmed: touch the liveness file."""
        if self.path is None:
            return
        try:
            with open(self.path, "a"):
                pass
            os.utime(self.path)
        except OSError as exc:
            if not self._warned:
                self._warned = True
                logger.warning("cannot touch the liveness file %s: %s", self.path, exc)

    def verdict(self) -> tuple[bool, str]:
        """``(healthy, one line saying why)``."""
        name = self.runtime.instance_id
        if not self.runtime.running:
            return False, f"scheduler {name} is not running"
        keeper = self.keeper()
        if keeper is None:
            return True, f"scheduler {name} is running (no leases to renew on this store)"
        beaten = keeper.beaten_at
        age = time.monotonic() - (self.started_at if beaten is None else beaten)
        if age > keeper.lease:
            what = "no heartbeat confirmed" if beaten is None else "last confirmed heartbeat"
            return False, (f"scheduler {name}: {what} for {age:.1f}s, more than its lease "
                           f"({keeper.lease:g}s)")
        return True, f"scheduler {name}: heartbeat confirmed {age:.1f}s ago"

    def alive_count(self) -> int | None:
        """Live records in this scheduler's store, ``None`` if it keeps none or did not
        answer within `READ_TIMEOUT`."""
        keeper = self.keeper()
        live = keeper.liveness if keeper is not None else None
        if keeper is None or live is None:
            return None
        future = keeper.submit(live.store.instances())
        if future is None:
            return None
        try:
            found = future.result(READ_TIMEOUT)
        except Exception as exc:
            future.cancel()
            logger.debug("reading liveness records for %s: %s", ALIVE, exc)
            return None
        return sum(1 for record in found.records if record.alive(found.now_ms))


def running() -> list[Health]:
    with _lock:
        return list(_running)


def healthz() -> tuple[bool, str]:
    """This process's verdict: every running scheduler healthy (and at least one)."""
    checks = [h.verdict() for h in running()]
    if not checks:
        return False, "no anarchon scheduler is running in this process"
    return all(ok for ok, _ in checks), "; ".join(line for _, line in checks)


class AliveCollector:
    """``anarchon_instances_alive`` at scrape time: the largest count of this process's
    schedulers' stores, kept for one heartbeat (no sample while no store answers)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._value: int | None = None
        self._until = 0.0

    def describe(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        yield GaugeMetricFamily(ALIVE, _ALIVE_HELP)

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        family = GaugeMetricFamily(ALIVE, _ALIVE_HELP)
        value = self.value()
        if value is not None:
            family.add_metric([], value)
        yield family

    def value(self) -> int | None:
        with self._lock:
            now = time.monotonic()
            if now >= self._until:
                schedulers = running()
                counts = [c for c in (h.alive_count() for h in schedulers) if c is not None]
                self._value = max(counts) if counts else None
                keepers = [k for k in (h.keeper() for h in schedulers) if k is not None]
                ttl = min((k.heartbeat for k in keepers), default=0.0)
                self._until = time.monotonic() + ttl
            return self._value


#: the one collector of this process (registered in the registries served)
ALIVE_COLLECTOR = AliveCollector()

_App = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


def with_healthz(metrics_app: _App) -> _App:
    """``metrics_app`` (prometheus_client's WSGI app) plus ``/healthz``."""
    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if environ.get("PATH_INFO") == "/healthz":
            ok, line = healthz()
            start_response("200 OK" if ok else "503 Service Unavailable",
                           [("Content-Type", "text/plain; charset=utf-8")])
            return [(line + "\n").encode()]
        return metrics_app(environ, start_response)

    return app


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


def start_server(app: _App, port: int, addr: str) -> int:
    """Serve ``app`` on ``addr:port`` from a daemon thread; returns the port bound."""
    server_class: type[_Server] = _Server
    if ":" in addr:
        class _Server6(_Server):
            address_family = socket.AF_INET6

        server_class = _Server6
    server = make_server(addr, port, app, server_class, _Quiet)
    threading.Thread(target=server.serve_forever, name="anarchon-metrics",
                     daemon=True).start()
    return int(server.server_port)


__all__ = ["ALIVE", "ALIVE_COLLECTOR", "Health", "healthz", "liveness_path",
           "start_server", "with_healthz"]
