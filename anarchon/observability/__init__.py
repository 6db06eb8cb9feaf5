"""What a scheduler tells operators: logs (always), Prometheus metrics (``metrics=True``)
and OpenTelemetry spans (when ``opentelemetry-api`` is installed), all fed by the one
function every event passes through (``anarchon.engine.runtime.EventSink.emit``)."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..backends.base import LeaseBackend
from .health import Health, liveness_path
from .logs import RunLog, fields
from .metrics import port_from, serve
from .tracing import available

if TYPE_CHECKING:
    from ..engine.lease_keeper import LeaseKeeper
    from ..engine.runtime import Runtime, SchedulerStats

logger = logging.getLogger("anarchon")


class Observer:
    """Logs, counts and traces the events of one scheduler (its ``runtime``: instance id,
    backend, clock, jobs; ``stats``: its no-I/O counts; ``keeper``: its lease keeper once
    started), every event the runtime's event sink emits, whether or not a listener wants it. With
    ``metrics=True`` (``prometheus_client``) it also counts them. Its `Health` answers
    ``/healthz`` and touches the liveness file (``liveness_file``, else
    ``ANARCHON_LIVENESS_FILE``)."""

    def __init__(self, runtime: Runtime, stats: Callable[[], SchedulerStats],
                 keeper: Callable[[], LeaseKeeper | None], metrics: bool,
                 liveness_file: str | os.PathLike[str] | None = None) -> None:
        if not isinstance(metrics, bool):
            raise TypeError(f"metrics must be True or False, got {metrics!r}")
        self.runtime = runtime
        self.stats = stats
        self.health = Health(runtime, keeper, liveness_path(liveness_file))
        runtime.events.observer = self  # the sink calls event() for each event
        self.log = RunLog(runtime.instance_id)
        self.metrics: Any = None
        if metrics:
            from .metrics import Metrics, time_store

            leased = isinstance(runtime.backend, LeaseBackend)
            self.metrics = Metrics(leased, runtime.clock.time)
            time_store(runtime.backend)
        self.spans: Any = None
        if available():
            from .tracing import RunSpans

            self.spans = RunSpans(runtime.instance_id)

    def event(self, type_: str, name: str | None, slot: int | None, attempt: int | None,
              reason: str | None, error: BaseException | None) -> None:
        self.log.event(type_, name, slot, attempt, reason, error)
        if self.metrics is not None:
            self.metrics.event(type_, name, slot, attempt, reason)
            if type_ != "skip":  # a skip changes neither the jobs nor the leases held
                stats = self.stats()  # no I/O: the engine's own counts
                self.metrics.gauges(stats.jobs, stats.held_leases)
        if self.spans is not None:
            self.spans.event(type_, name, slot, attempt, reason, error)

    def started(self) -> None:
        runtime = self.runtime
        logger.info("scheduler %s started with %d job(s) on %s", runtime.instance_id,
                    len(runtime.jobs), runtime.backend.name,
                    extra=fields(None, None, None, runtime.instance_id))
        self.health.started()
        if self.metrics is not None:
            stats = self.stats()
            self.metrics.gauges(stats.jobs, stats.held_leases)

    def stopped(self) -> None:
        self.health.stopped()
        if self.metrics is not None:
            self.metrics.stopped()
        if self.spans is not None:
            self.spans.stopped()
        logger.info("scheduler %s stopped", self.runtime.instance_id,
                    extra=fields(None, None, None, self.runtime.instance_id))


def serve_metrics(port: int | str | None = None, addr: str = "0.0.0.0") -> int | None:
    """Serve Prometheus' ``/metrics`` and ``/healthz`` on ``port`` (default:
    ``ANARCHON_METRICS_PORT``; neither given: nothing is served) from a daemon thread;
    returns the port bound (``port=0``: one the system chose) or ``None``.
    """
    resolved = port_from(port, "port")
    if resolved is not None:
        return serve(resolved, addr)
    return resolved


__all__ = ["Observer", "port_from", "serve_metrics"]
