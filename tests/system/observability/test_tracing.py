"""OpenTelemetry: one ``anarchon.run`` span per run (in-memory exporter), its context in
the Dramatiq message the run sends, so the worker's task span is its child; and nothing
of OpenTelemetry imported when it is not installed."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import dramatiq
import pytest
from dramatiq import Broker, Middleware, Worker
from dramatiq.broker import MessageProxy
from dramatiq.brokers.stub import StubBroker
from opentelemetry import propagate, trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import anarchon_dramatiq as ad
from anarchon import AsyncScheduler, RunContext
from anarchon.backends.sqlite import SqliteBackend
from tests.harness.examples import ROOT, example_env
from tests.support import wait_until

EXPORTER = InMemorySpanExporter()


@pytest.fixture(scope="module", autouse=True)
def provider() -> None:
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(EXPORTER))
    trace.set_tracer_provider(tracer_provider)


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    EXPORTER.clear()
    yield EXPORTER
    EXPORTER.clear()


def runs(exporter: InMemorySpanExporter, job: str) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans()
            if s.name == "anarchon.run" and s.attributes is not None
            and s.attributes.get("anarchon.job") == job]


def test_one_span_per_run_with_its_attributes(spans: InMemorySpanExporter,
                                               tmp_path: Path) -> None:
    async def main() -> None:
        scheduler = AsyncScheduler(SqliteBackend(database=str(tmp_path / "jobs.db")),
                                   instance_id="tracer", jitter=0)

        @scheduler.every("fine", "1s")
        def fine(ctx: RunContext) -> None: ...

        @scheduler.every("bad", "1s")
        def bad(ctx: RunContext) -> None:
            raise ValueError("kaput")

        async with scheduler:
            await wait_until(lambda: bool(runs(spans, "fine") and runs(spans, "bad")), 10,
                             "a span of each job")
        fine_runs = {r.slot for r in await scheduler.history("fine", 50)
                     if r.status == "success"}
        span = runs(spans, "fine")[0]
        assert span.attributes is not None and span.attributes["anarchon.slot"] in fine_runs

    asyncio.run(main())
    fine, bad = runs(spans, "fine")[0], runs(spans, "bad")[0]
    assert fine.attributes is not None and bad.attributes is not None
    assert {k: v for k, v in fine.attributes.items() if k != "anarchon.slot"} == {
        "anarchon.job": "fine", "anarchon.attempt": 1, "anarchon.reason": "scheduled",
        "anarchon.instance": "tracer", "anarchon.outcome": "success"}
    assert bad.attributes["anarchon.outcome"] == "failure"
    assert not bad.status.is_ok and [e.name for e in bad.events] == ["exception"]


class TaskSpans(Middleware):
    """A worker's tracing, as an OpenTelemetry instrumentation does it: the task span's
    parent is the context the message carries."""

    def __init__(self) -> None:
        self.headers: list[dict[str, Any]] = []
        self._open: dict[str, Any] = {}

    def before_process_message(self, broker: Broker, message: MessageProxy) -> None:
        self.headers.append(dict(message.options))
        parent = propagate.extract(message.options)
        self._open[message.message_id] = trace.get_tracer("worker").start_span(
            "worker.task", context=parent)

    def after_process_message(self, broker: Broker, message: MessageProxy, *,
                              result: Any = None, exception: Any = None) -> None:
        self._open.pop(message.message_id).end()


def test_the_worker_task_span_is_a_child_of_the_run_span(spans: InMemorySpanExporter,
                                                          tmp_path: Path) -> None:
    broker = StubBroker()
    tasks = TaskSpans()
    broker.add_middleware(tasks)
    broker.emit_after("process_boot")

    @ad.every("1s")
    @dramatiq.actor(broker=broker)
    def beat() -> None: ...

    worker = Worker(broker, worker_timeout=50)
    worker.start()

    def task_spans() -> list[ReadableSpan]:
        return [s for s in spans.get_finished_spans() if s.name == "worker.task"]

    async def main() -> None:
        scheduler = AsyncScheduler(SqliteBackend(database=str(tmp_path / "jobs.db")),
                                   instance_id="sender", jitter=0)
        ad.register_actors(scheduler, broker)
        async with scheduler:
            await wait_until(lambda: bool(task_spans() and runs(spans, "beat")), 10,
                             "a worker span")

    try:
        asyncio.run(main())
    finally:
        worker.stop()
        broker.close()
    run = runs(spans, "beat")[0]
    assert run.attributes is not None
    slot = run.attributes["anarchon.slot"]
    header = next(h for h in tasks.headers if h["anarchon_slot"] == slot)
    _version, trace_id, span_id, _ = header["traceparent"].split("-")
    assert run.context is not None
    assert int(trace_id, 16) == run.context.trace_id
    assert int(span_id, 16) == run.context.span_id
    child = next(s for s in task_spans() if s.parent is not None
                 and s.parent.span_id == run.context.span_id)
    assert child.context is not None and child.context.trace_id == run.context.trace_id


HIDDEN = """
import importlib.abc, sys
class Hide(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "opentelemetry" or name.startswith("opentelemetry."):
            raise ModuleNotFoundError(name)
        return None
sys.meta_path.insert(0, Hide())
import threading
from anarchon import Scheduler
from anarchon.backends.sqlite import SqliteBackend
import anarchon_celery, anarchon_dramatiq
done = threading.Event()
scheduler = Scheduler(SqliteBackend(database=sys.argv[1]))
scheduler.every("tick", "1s", lambda ctx: done.set())
with scheduler:
    assert done.wait(10)
assert not [m for m in sys.modules if m.startswith("opentelemetry")], "imported"
print("ok")
"""


def test_nothing_of_opentelemetry_is_imported_without_it(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-c", HIDDEN, str(tmp_path / "jobs.db")],
                          cwd=ROOT, env=example_env(), capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr


def test_the_celery_headers_carry_the_run_span(spans: InMemorySpanExporter,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The headers beat publishes a run with carry its span's ``traceparent``."""
    from celery import Celery
    from celery.result import AsyncResult

    from anarchon import AbortSignal
    from anarchon.observability.tracing import RunSpans
    from anarchon.schedules.kinds import ms_to_datetime
    from anarchon_celery.tasks.publish import Publisher

    app = Celery("traced", set_as_current=False, broker="memory://")
    sent: list[dict[str, Any]] = []

    def send_task(name: str, args: Any = None, kwargs: Any = None, **options: Any) -> Any:
        sent.append(options)
        return AsyncResult("sent", app=app)

    monkeypatch.setattr(app, "send_task", send_task)

    class Entry:
        name, task, schedule = "tick", "t.remote", 5.0
        args: ClassVar[list[Any]] = []
        kwargs: ClassVar[dict[str, Any]] = {}

    slot = 1_000
    run_spans = RunSpans("celery-beat")
    run_spans.event("start", "tick", slot, 1, "scheduled", None)
    Publisher(app, Entry(), {}, track=False, queue_lease=60,
              max_late=3600 * 24 * 365 * 100)(
        RunContext("tick", slot, ms_to_datetime(slot), "celery-beat", False, 1, "scheduled",
                   AbortSignal(), None))
    run_spans.event("success", "tick", slot, 1, "scheduled", None)
    run = runs(spans, "tick")[0]
    assert run.context is not None and len(sent) == 1
    _version, trace_id, span_id, _ = sent[0]["headers"]["traceparent"].split("-")
    assert int(trace_id, 16) == run.context.trace_id
    assert int(span_id, 16) == run.context.span_id


def test_spans_started_in_a_handler_are_children_of_its_run_span(
        spans: InMemorySpanExporter, tmp_path: Path) -> None:
    tracer = trace.get_tracer("user")

    async def main() -> None:
        scheduler = AsyncScheduler(SqliteBackend(database=str(tmp_path / "jobs.db")),
                                   instance_id="tracer", jitter=0)

        @scheduler.every("threaded", "1s")
        def threaded(ctx: RunContext) -> None:
            with tracer.start_as_current_span("user.threaded"):
                pass

        @scheduler.every("coroutine", "1s")
        async def coroutine(ctx: RunContext) -> None:
            with tracer.start_as_current_span("user.coroutine"):
                await asyncio.sleep(0)

        async with scheduler:
            await wait_until(lambda: bool(runs(spans, "threaded") and runs(spans, "coroutine")
                                          and len(user_spans()) >= 2), 10, "user spans")
        # the scheduler's own task has no current span left behind
        assert trace.get_current_span() is trace.INVALID_SPAN

    def user_spans() -> list[ReadableSpan]:
        return [s for s in spans.get_finished_spans() if s.name.startswith("user.")]

    asyncio.run(main())
    for job in ("threaded", "coroutine"):
        run_ids = {s.context.span_id for s in runs(spans, job) if s.context is not None}
        mine = [s for s in user_spans() if s.name == f"user.{job}"]
        assert mine, job
        for span in mine:
            assert span.parent is not None and span.parent.span_id in run_ids, job
            assert span.context is not None
            assert span.context.trace_id == next(
                r.context.trace_id for r in runs(spans, job)
                if r.context is not None and r.context.span_id == span.parent.span_id)
