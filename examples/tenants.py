"""One class, many tenants: ``scheduler.register(obj, prefix=..., defaults=...)``.

    python examples/tenants.py                     # SQLite in the temp folder
    python examples/tenants.py --seconds 8         # exit by itself
    python examples/tenants.py --backend postgresql://postgres@localhost/test?table=tenants

``Tenant`` declares its jobs once with ``@anarchon.every(..., scheduler=None)`` and
``@anarchon.cron(..., scheduler=None)``: ``scheduler=None`` only *marks* the methods, so
constructing a tenant registers nothing. Each tenant object is then registered explicitly:

* ``prefix="acme-"`` gives its jobs distinct names (``acme-sync``, ``acme-digest``); two
  objects with the same prefix would collide and raise ``ValueError``;
* ``defaults={"timezone": ..., "data": {...}}`` fills options the marks leave out, per
  tenant: the cron job runs at 09:00 in the tenant's own time zone, and the handler reads
  the tenant's settings from ``ctx.data`` (dicts merge, the mark's own keys win).

Name jobs explicitly (as here) rather than relying on ``ClassName-method``: a rename of
the method would otherwise change the job name, and with it the job's history.
"""

from __future__ import annotations

import argparse
import os
import signal
import tempfile
import threading
from datetime import datetime

import anarchon
from anarchon import RunContext, Scheduler, from_url


def say(text: str) -> None:
    print(f"{datetime.now():%H:%M:%S}  {text}", flush=True)


class Tenant:
    """A customer of a multi-tenant service; its jobs are declared once, here."""

    def __init__(self, slug: str) -> None:
        self.slug = slug
        self.synced = 0

    @anarchon.every("sync", "3s", scheduler=None, data={"batch": 100})  # type: ignore[untyped-decorator,unused-ignore]
    def sync(self, ctx: RunContext) -> None:
        self.synced += 1
        say(f"{ctx.name}: syncing {self.slug} (plan {ctx.data['plan']}, batch "
            f"{ctx.data['batch']}, region {ctx.data['region']})")

    @anarchon.cron("digest", "0 9 * * *", scheduler=None)  # type: ignore[untyped-decorator,unused-ignore]
    def digest(self, ctx: RunContext) -> None:
        say(f"{ctx.name}: morning digest for {self.slug}")


TENANTS = {
    "acme": {"timezone": "Europe/Berlin", "data": {"plan": "gold", "region": "eu"}},
    # "batch": 10 loses to the mark's own data={"batch": 100}: the more specific level wins
    "globex": {"timezone": "America/New_York", "data": {"plan": "free", "region": "us",
                                                        "batch": 10}},
}


def build(url: str) -> tuple[Scheduler, list[Tenant]]:
    """Register every tenant's jobs under its own prefix and defaults."""
    scheduler = Scheduler(from_url(url), jitter="300ms")
    tenants = []
    for slug, defaults in TENANTS.items():
        tenant = Tenant(slug)
        names = scheduler.register(tenant, prefix=f"{slug}-", defaults=defaults)
        say(f"registered {names} for {slug}; digest next at "
            f"{scheduler.next_run(f'{slug}-digest'):%Y-%m-%d %H:%M} UTC "
            f"(09:00 {defaults['timezone']})")
        tenants.append(tenant)
    try:
        scheduler.register(Tenant("acme-again"), prefix="acme-")
    except ValueError as exc:
        say(f"a second object with the same prefix is refused: {exc}")
    return scheduler, tenants


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else "")
    parser.add_argument("--backend", default=os.environ.get("ANARCHON_BACKEND") or
                        f"sqlite:///{os.path.join(tempfile.gettempdir(), 'anarchon-tenants.db')}")
    parser.add_argument("--seconds", type=float, default=None,
                        help="stop by itself after this many seconds")
    args = parser.parse_args()
    scheduler, tenants = build(args.backend)
    if args.seconds is None:
        scheduler.run()
        return
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    scheduler.start()
    stop.wait(args.seconds)
    scheduler.stop()
    say("synced here: " + ", ".join(f"{t.slug} {t.synced}x" for t in tenants))


if __name__ == "__main__":
    main()
