"""A Dramatiq actor where django_dramatiq's workers look for actors (an app's ``tasks``
module): scheduled by ``manage.py anarchon run`` without extra settings. Imported only
when Dramatiq actors are scheduled (``ANARCHON["DRAMATIQ"]``), on the broker set then."""

from __future__ import annotations

import dramatiq

import anarchon_dramatiq as ad


@ad.every("5m", name="testapp-tasks-refresh")
@dramatiq.actor
def testapp_tasks_refresh() -> None:
    """Does nothing: the test only needs it found, sent and recorded."""
