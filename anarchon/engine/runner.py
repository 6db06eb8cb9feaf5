"""Runs one handler: sync ones in their own thread, async ones as a task on the loop."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any

from ..context import RunContext
from ..errors import JobTimeout
from ..jobs.definition import Job
from ..observability.tracing import enter, span_of

logger = logging.getLogger("anarchon")


@dataclass(frozen=True)
class Outcome:
    """How a handler ended: ``error`` is what it raised (or the timeout), else ``None``."""

    error: BaseException | None
    #: it raised after its signal was aborted (on stop this means "hand it over")
    raised_on_abort: bool


async def run_handler(job: Job, ctx: RunContext) -> Outcome:
    """Run ``job.handler(ctx)`` to its end, aborting the signal after ``job.timeout``.

    A sync handler cannot be killed: after a timeout it keeps its thread until it
    returns, and the run stays leased meanwhile (so nothing overlaps it).
    """
    loop = asyncio.get_running_loop()
    span = span_of(ctx)  # the run's OpenTelemetry span: current inside the handler
    if job.is_async:
        coro = job.handler(ctx)
        task: asyncio.Future[object] = asyncio.ensure_future(
            coro if span is None else _in_span(coro, span))
        ctx.signal.on_abort(lambda: loop.call_soon_threadsafe(task.cancel))
    else:
        task = loop.create_future()
        thread = threading.Thread(
            target=_run_in_thread, args=(job, ctx, loop, task, span),
            name=f"anarchon-job-{job.name}", daemon=True,
        )
        thread.start()
    try:
        done, _ = await asyncio.wait({task}, timeout=job.timeout)
        if not done:
            ctx.signal.abort("timeout")
            await asyncio.wait({task})
    except asyncio.CancelledError:
        task.cancel()
        raise
    error = _task_error(task)
    if ctx.signal.reason == "timeout":
        error = JobTimeout(f"job {job.name!r} exceeded its timeout of {job.timeout:g}s")
    return Outcome(error, error is not None and ctx.signal.aborted)


async def _in_span(coro: Coroutine[Any, Any, object], span: Any) -> object:
    leave = enter(span)  # in the task's own context
    try:
        return await coro
    finally:
        leave()


def _run_in_thread(job: Job, ctx: RunContext, loop: asyncio.AbstractEventLoop,
                   future: asyncio.Future[object], span: Any = None) -> None:
    result: object = None
    error: BaseException | None = None
    leave = enter(span) if span is not None else None
    try:
        result = job.handler(ctx)
    except BaseException as exc:  # reported through the future, never lost
        error = exc
    finally:
        if leave is not None:
            leave()
    try:
        loop.call_soon_threadsafe(_settle, future, result, error)
    except RuntimeError:  # the scheduler stopped (and its loop closed) while we ran
        logger.info("job %r slot %s ended after its scheduler stopped; not recorded",
                    job.name, ctx.slot)


def _settle(future: asyncio.Future[object], result: object, error: BaseException | None) -> None:
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


def _task_error(task: asyncio.Future[object]) -> BaseException | None:
    if task.cancelled():
        return asyncio.CancelledError()
    return task.exception()
