"""anarchon for Django: settings-driven backends, autodiscovered jobs, ``manage.py
anarchon``, system checks and admin history pages.

```python
INSTALLED_APPS += ["anarchon_django"]
ANARCHON = {"BACKEND": "django"}          # see anarchon_django.conf for every key

# <app>/jobs.py
from anarchon_django import every, cron

@every("sync", "10s")
def sync(ctx): ...
```
Then run ``python manage.py anarchon run`` on every instance.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .declarations import at, cron, every

if TYPE_CHECKING:
    from anarchon import Scheduler


def get_scheduler() -> Scheduler:
    """The process-wide scheduler for history queries and manual-run requests."""
    from .runtime import get_scheduler as shared

    return shared()


def build_scheduler(jobs: Any = None, **options: Any) -> Scheduler:
    """A new scheduler from the settings (what ``manage.py anarchon run`` starts)."""
    from .runtime import build_scheduler as build

    return build(jobs, **options)


def trigger(name: str, data: Any = None) -> None:
    """Request a manual run through the store (exactly one running instance runs it)."""
    from .runtime import request_run

    request_run(name, data)


__all__ = ["at", "build_scheduler", "cron", "every", "get_scheduler", "trigger"]
