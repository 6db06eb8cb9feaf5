"""Jobs of the shop app, found by anarchon_django's autodiscovery.

Run ``python manage.py anarchon run`` in three terminals: each slot of ``tick`` runs in
one of them and writes one ``Tick`` row keyed by the slot.
"""

from __future__ import annotations

from anarchon import RunContext
from anarchon_django import cron, every

from .models import Tick


@every("tick", "5s")
def tick(ctx: RunContext) -> None:
    """Record the slot; ``update_or_create`` on the slot makes a second attempt harmless."""
    Tick.objects.update_or_create(slot=ctx.slot, defaults={
        "instance": ctx.instance_id, "attempt": ctx.attempt})
    print(f"tick slot {ctx.scheduled_at:%H:%M:%S} attempt {ctx.attempt} ({ctx.reason}) "
          f"on {ctx.instance_id}", flush=True)


@every("report", "20s")
def report(ctx: RunContext) -> None:
    """A longer job: kill -9 its runner and watch another instance take it over."""
    print(f"report slot {ctx.scheduled_at:%H:%M:%S} attempt {ctx.attempt} started on "
          f"{ctx.instance_id}", flush=True)
    if ctx.signal.wait(10):
        ctx.signal.raise_if_aborted()  # SIGTERM: hand the run over
    print(f"report slot {ctx.scheduled_at:%H:%M:%S} done", flush=True)


@cron("cleanup", "30 3 * * *", catch_up="2h")
def cleanup(ctx: RunContext) -> None:
    """Nightly, in TIME_ZONE (Europe/Berlin); caught up if every instance was down."""
    Tick.objects.filter(slot__lt=ctx.slot - 7 * 86_400_000).delete()
