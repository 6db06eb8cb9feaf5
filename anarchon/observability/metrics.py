"""Prometheus metrics (the ``prometheus`` extra): counters fed by a scheduler's events
and by a timing wrapper around its store's calls, in ``prometheus_client``'s default
registry. Labels are bounded: job names, outcomes, reasons, store operations.

Under ``PROMETHEUS_MULTIPROC_DIR`` (processes forked by Celery or Gunicorn)
``prometheus_client`` keeps the values in files of that directory and `serve()` collects
them from every process.
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import os
import time
import weakref
from collections.abc import Callable
from typing import Any

from .health import ALIVE_COLLECTOR, start_server, with_healthz

#: store operations timed (every call the engine makes but the wake-up channel's wait)
OPERATIONS = ("register", "claim", "claim_many", "confirm", "finish", "finish_many",
              "record_skips", "start_manual", "finish_manual", "history", "known_jobs",
              "poll", "read_value", "swap_value", "heartbeat", "heartbeat_live", "leave",
              "instances", "release", "unfinished", "note")
#: the outcome label of ``anarchon_runs_total`` for each run-ending event
_OUTCOMES = {"success": "success", "failure": "failure", "interrupted": "interrupted",
             "lost": "lost"}
#: the result label of ``anarchon_claims_total`` for each skip reason the store answered
_REFUSED = {"taken": "taken", "late": "late", "overlap": "overlap", "early": "early"}
_DELAY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
                  60.0, 300.0)
_STORE_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
                  2.5, 5.0)
_instruments: dict[str, Any] = {}
#: the ``lease_clone`` wrappers ``time_store()`` installed (a backend is timed once)
_TIMED_CLONES: weakref.WeakSet[Callable[[], Any]] = weakref.WeakSet()
#: set while a timed store call runs: a call it makes to another method of its backend
#: (SQLite's and PostgreSQL's ``claim`` is one ``claim_many``) is part of it, not timed
_TIMING: contextvars.ContextVar[bool] = contextvars.ContextVar("anarchon_timing",
                                                               default=False)


def _client() -> Any:
    try:
        import prometheus_client
    except ImportError as exc:
        raise ImportError(
            "metrics=True needs prometheus_client, which anarchon's 'prometheus' extra "
            "installs: pip install 'anarchon[prometheus]'") from exc
    return prometheus_client


def instruments() -> dict[str, Any]:
    """The metrics, registered once per process in the default registry."""
    if not _instruments:
        client = _client()
        counter, histogram, gauge = client.Counter, client.Histogram, client.Gauge
        _instruments.update(
            runs=counter("anarchon_runs", "Runs ended, by job and outcome (success, "
                         "failure, interrupted, lost)", ["job", "outcome"]),
            skips=counter("anarchon_slot_skips", "Slots skipped, by job and reason",
                          ["job", "reason"]),
            claims=counter("anarchon_claims", "Claims answered by the store, by result "
                           "(won, taken, late, overlap, early)", ["result"]),
            takeovers=counter("anarchon_takeovers", "Runs taken over from an instance "
                              "whose lease expired or that handed them over", ["job"]),
            delay=histogram("anarchon_start_delay_seconds", "Start of a run minus its slot "
                            "(scheduled and catch-up runs)", buckets=_DELAY_BUCKETS),
            duration=histogram("anarchon_run_duration_seconds", "Duration of runs ended "
                               "here", ["job"], buckets=_DELAY_BUCKETS),
            store_errors=counter("anarchon_store_errors", "Store calls that raised, by "
                                 "operation", ["operation"]),
            store_seconds=histogram("anarchon_store_call_seconds", "Duration of store "
                                    "calls, by operation", ["operation"],
                                    buckets=_STORE_BUCKETS),
            leases=gauge("anarchon_leases_held", "Runs executing here under a lease",
                         multiprocess_mode="livesum"),
            jobs=gauge("anarchon_jobs_registered", "Jobs registered with the scheduler",
                       multiprocess_mode="livemax"),
        )
        client.REGISTRY.register(ALIVE_COLLECTOR)  # anarchon_instances_alive
    return _instruments


#: runs started here whose end is awaited at most (a detached run ends on a worker)
MAX_TRACKED = 10_000


class Metrics:
    """Turns one scheduler's events into the metrics above.

    A run counts once in ``anarchon_runs_total``, by the first event that ends it here: a
    run that timed out is ``interrupted``, one whose lease was lost ``lost``; a run
    detached to a worker (Celery, Dramatiq) is counted by neither.
    """

    def __init__(self, leased: bool, clock: Callable[[], float]) -> None:
        self.m = instruments()
        self._leased = leased  # runs hold leases (False: a claim-only store)
        self._clock = clock
        self._started: dict[tuple[str | None, int | None, int | None], float] = {}
        #: labelled children by (metric, *labels): ``labels()`` takes a lock and checks
        #: its arguments at every call (the labels are bounded, so is this)
        self._children: dict[tuple[str | None, ...], Any] = {}

    def _child(self, metric: str, *labels: str | None) -> Any:
        key = (metric, *labels)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = self.m[metric].labels(*labels)
        return child

    def event(self, type_: str, name: str | None, slot: int | None, attempt: int | None,
              reason: str | None) -> None:
        m = self.m
        if type_ == "start":
            now = self._clock()
            self._started[(name, slot, attempt)] = now
            if len(self._started) > MAX_TRACKED:
                del self._started[next(iter(self._started))]
            if reason == "takeover":
                self._child("takeovers", name).inc()
            elif reason in ("scheduled", "catch-up") and slot is not None:
                m["delay"].observe(max(0.0, now - slot / 1000))
            if reason != "manual":
                self._child("claims", "won").inc()
        elif type_ in _OUTCOMES:
            started = self._started.pop((name, slot, attempt), None)
            if started is not None:
                self._child("runs", name, _OUTCOMES[type_]).inc()
                self._child("duration", name).observe(max(0.0, self._clock() - started))
        elif type_ == "skip":
            self._child("skips", name, reason).inc()
            if reason in _REFUSED:
                self._child("claims", _REFUSED[reason]).inc()

    def gauges(self, jobs: int, held_leases: int) -> None:
        """Jobs registered and leases held, from the scheduler's ``stats()``."""
        self.m["jobs"].set(jobs)
        if self._leased:
            self.m["leases"].set(held_leases)

    def stopped(self) -> None:
        self._started.clear()
        if self._leased:
            self.m["leases"].set(0)


def time_store(backend: Any) -> None:
    """Time every store call of ``backend`` (and of its lease connection's clone) into
    ``anarchon_store_call_seconds``, counting the ones that raise: instance attributes
    wrap the methods, so the backend stays the object (and the class) it was. A call is
    timed once, under the operation the engine called (not again as the methods it
    calls in turn)."""
    m = instruments()
    for operation in OPERATIONS:
        method = getattr(backend, operation, None)
        if method is not None and inspect.iscoroutinefunction(method):
            setattr(backend, operation, _timed(method, operation, m))
    clone = getattr(backend, "lease_clone", None)
    if callable(clone) and clone not in _TIMED_CLONES:
        @functools.wraps(clone)
        def timed_clone() -> Any:
            copy = clone()
            if copy is not None:
                time_store(copy)
            return copy

        _TIMED_CLONES.add(timed_clone)
        backend.lease_clone = timed_clone


def _timed(method: Any, operation: str, m: dict[str, Any]) -> Any:
    seconds = m["store_seconds"].labels(operation)
    errors = m["store_errors"].labels(operation)

    @functools.wraps(method)
    async def timed(*args: Any, **kwargs: Any) -> Any:
        if _TIMING.get():
            return await method(*args, **kwargs)
        token = _TIMING.set(True)
        began = time.perf_counter()
        try:
            return await method(*args, **kwargs)
        except Exception:
            errors.inc()
            raise
        finally:
            seconds.observe(time.perf_counter() - began)
            _TIMING.reset(token)

    return timed


def serve(port: int, addr: str = "0.0.0.0") -> int:
    """Serve ``/metrics`` (and ``/healthz``, see anarchon.observability.health) on
    ``port`` from a daemon thread: the default registry, or under
    ``PROMETHEUS_MULTIPROC_DIR`` every process's values; returns the port bound."""
    client = _client()
    instruments()
    registry = client.REGISTRY
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        registry = client.CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
        registry.register(ALIVE_COLLECTOR)
    return start_server(with_healthz(client.make_wsgi_app(registry)), port, addr)


def port_from(value: object, source: str = "ANARCHON_METRICS_PORT") -> int | None:
    """A metrics port given as a flag or in ``ANARCHON_METRICS_PORT``; ``None``: none."""
    if value is None or value == "":
        value = os.environ.get("ANARCHON_METRICS_PORT") or None
        if value is None:
            return None
    try:
        port = int(str(value))
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise ValueError(f"{source} must be a port number (0-65535), got {value!r}")
    return port


__all__ = ["Metrics", "OPERATIONS", "instruments", "port_from", "serve", "time_store"]
