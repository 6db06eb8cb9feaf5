"""OpenTelemetry traces (the ``otel`` extra): one ``anarchon.run`` span per run, whose
context the Celery and Dramatiq layers put in the message they send (W3C
``traceparent``), so the worker's task span is its child. The span is the current span
inside the handler (its thread, or its task), so spans the handler starts are its
children.

Without ``opentelemetry-api`` installed nothing here imports it and every call is a
no-op; with it and no tracer provider configured, its spans are OpenTelemetry's no-op
spans.
"""

from __future__ import annotations

import importlib.util
import threading
from collections.abc import Callable, MutableMapping
from typing import Any

_Key = tuple[str, str | None, int | None, int | None]
#: runs whose span is open at most (the oldest is ended beyond)
MAX_OPEN = 10_000
_OUTCOMES = frozenset({"success", "failure", "interrupted", "lost"})
_open: dict[_Key, Any] = {}
_lock = threading.Lock()


def available() -> bool:
    """Whether ``opentelemetry-api`` is installed (looked up, not imported)."""
    try:
        return importlib.util.find_spec("opentelemetry.trace") is not None
    except ModuleNotFoundError:
        return False


class RunSpans:
    """Opens and ends the ``anarchon.run`` spans of one scheduler's runs."""

    def __init__(self, instance: str) -> None:
        from opentelemetry import trace

        self.instance = instance
        self._tracer = trace.get_tracer("anarchon")

    def event(self, type_: str, name: str | None, slot: int | None, attempt: int | None,
              reason: str | None, error: BaseException | None) -> None:
        key = (self.instance, name, slot, attempt)
        if type_ == "start":
            span = self._tracer.start_span("anarchon.run", attributes={
                "anarchon.job": name or "", "anarchon.slot": slot or 0,
                "anarchon.attempt": attempt or 0, "anarchon.reason": reason or "",
                "anarchon.instance": self.instance})
            with _lock:
                _open[key] = span
                oldest = next(iter(_open)) if len(_open) > MAX_OPEN else None
                stale = _open.pop(oldest) if oldest is not None else None
            if stale is not None:
                _end(stale, "unknown", None)
        elif type_ in _OUTCOMES:
            with _lock:
                span = _open.pop(key, None)
            if span is not None:
                _end(span, type_, error)

    def stopped(self) -> None:
        with _lock:
            mine = [key for key in _open if key[0] == self.instance]
            spans = [_open.pop(key) for key in mine]
        for span in spans:
            _end(span, "interrupted", None)


def _end(span: Any, outcome: str, error: BaseException | None) -> None:
    span.set_attribute("anarchon.outcome", outcome)
    if error is not None:
        from opentelemetry.trace import Status, StatusCode

        span.record_exception(error)
        span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"))
    span.end()


def span_of(ctx: Any) -> Any:
    """The open span of run ``ctx`` (``None``: none, e.g. OpenTelemetry not installed)."""
    if not _open:
        return None
    with _lock:
        return _open.get((ctx.instance_id, ctx.name, ctx.slot, ctx.attempt))


def enter(span: Any) -> Callable[[], None]:
    """Make ``span`` the current span of this thread or task (the handler's, so spans it
    starts are its children); returns what undoes it."""
    from opentelemetry import context, trace

    try:
        token = context.attach(trace.set_span_in_context(span))
    except Exception:  # tracing never stops a handler
        return lambda: None
    return lambda: context.detach(token)


def inject(headers: MutableMapping[str, Any], ctx: Any) -> None:
    """Put the context of run ``ctx``'s span in ``headers`` (``traceparent``, and
    ``tracestate`` if any): called where the Celery and Dramatiq layers build a run's
    message. A detached run (a worker finishes it) ends its span here, outcome ``sent``.
    """
    if not _open:
        return
    key = (ctx.instance_id, ctx.name, ctx.slot, ctx.attempt)
    with _lock:
        span = _open.get(key)
        if span is not None and ctx.detached_lease is not None:
            del _open[key]
    if span is None:
        return
    from opentelemetry import propagate, trace

    propagate.inject(headers, context=trace.set_span_in_context(span))
    if ctx.detached_lease is not None:
        _end(span, "sent", None)


__all__ = ["MAX_OPEN", "RunSpans", "available", "enter", "inject", "span_of"]
