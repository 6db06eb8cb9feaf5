"""anarchon for Django: settings-driven backends, autodiscovered jobs, ``manage.py
anarchon``, system checks and admin history pages.

```python
INSTALLED_APPS += ["anarchon_django"]
ANARCHON = {"BACKEND": "django"}          # see anarchon_django.settings.conf for every key

# <app>/jobs.py
from anarchon_django import every, cron, handler

@every("sync", "10s")
def sync(ctx): ...

@handler("report")          # offered for dynamic jobs (the admin's Dynamic jobs page)
def report(ctx): ...        # ctx.params: the job's stored params
```
Then run ``python manage.py anarchon run`` on every instance.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from anarchon_django.settings.declarations import at, cron, every, handler

if TYPE_CHECKING:
    from anarchon import Scheduler


def get_scheduler() -> Scheduler:
    """The process-wide scheduler for history queries and manual-run requests."""
    from anarchon_django.control.runtime import get_scheduler as shared

    return shared()


def build_scheduler(jobs: Any = None, **options: Any) -> Scheduler:
    """A new scheduler from the settings (what ``manage.py anarchon run`` starts)."""
    from anarchon_django.control.runtime import build_scheduler as build

    return build(jobs, **options)


def trigger(name: str, data: Any = None) -> None:
    """Request a manual run through the store (exactly one running instance runs it)."""
    from anarchon_django.control.runtime import request_run

    request_run(name, data)


__all__ = ["at", "build_scheduler", "cron", "every", "get_scheduler", "handler", "trigger"]
