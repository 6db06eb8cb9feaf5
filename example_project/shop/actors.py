"""Dramatiq actors scheduled with anarchon_dramatiq marks (schedule first).

    dramatiq shop.actors                                   # workers
    anarchon-dramatiq shop.actors                          # schedulers, on the project's store

(run both from ``example_project/`` with ``DJANGO_SETTINGS_MODULE=project.settings``.)
"""

from __future__ import annotations

import django

django.setup()

import dramatiq  # noqa: E402 - after django.setup(): the broker reads settings
import project.dramatiq_setup  # noqa: E402, F401 - sets the broker before actors exist

import anarchon_dramatiq as ad  # noqa: E402


@ad.every("1m", max_attempts=1)
@dramatiq.actor(queue_name="shop", max_retries=0)
def refresh_prices() -> None:
    info = ad.run_info()
    print(f"refreshing prices for slot {info.slot if info else None}", flush=True)


@ad.cron("0 6 * * 1", name="weekly-newsletter", timezone="Europe/Berlin")
@dramatiq.actor(queue_name="shop")
def newsletter() -> None:
    print("sending the weekly newsletter", flush=True)
