"""Handlers named by ``ANARCHON["JOBS"]`` in tests; cluster runs log to a JSONL file."""

from __future__ import annotations

import json
import os
import time

from anarchon import RunContext


def record(ctx: RunContext) -> None:
    """Log begin/end with slot, attempt and pid to ``$ANARCHON_TEST_LOG``; wait
    ``ctx.data["duration"]`` seconds (or until aborted)."""
    data = ctx.data if isinstance(ctx.data, dict) else {}
    _write(kind="begin", job=ctx.name, slot=ctx.slot, attempt=ctx.attempt, reason=ctx.reason,
           instance=ctx.instance_id)
    aborted = ctx.signal.wait(float(data.get("duration", 0.0)))
    _write(kind="end", job=ctx.name, slot=ctx.slot, attempt=ctx.attempt, aborted=aborted,
           instance=ctx.instance_id)
    if aborted:
        ctx.signal.raise_if_aborted()


def fail(ctx: RunContext) -> None:
    raise ValueError("settings job failed on purpose")


def _write(**fields: object) -> None:
    path = os.environ.get("ANARCHON_TEST_LOG")
    if not path:
        return
    fields.update(t=time.time(), pid=os.getpid())
    with open(path, "a") as handle:
        handle.write(json.dumps(fields) + "\n")
