"""The jobs of the metrics tests: one succeeds, one fails, one overlaps its next slots
(skipped as ``overlap``); every second."""

from __future__ import annotations

from anarchon import RunContext

JOBS = ("ok", "boom", "slow")


def ok(ctx: RunContext) -> None:
    """Succeeds."""


def boom(ctx: RunContext) -> None:
    raise ValueError("kaput")


def slow(ctx: RunContext) -> None:
    ctx.signal.wait(60)  # until the scheduler stops: its next slots are skipped


def register(scheduler: object) -> None:
    for name in JOBS:
        scheduler.every(name, "1s", globals()[name])  # type: ignore[attr-defined]
