"""A handler for dynamic jobs (``anarchon_django.handler``), autodiscovered only by the
processes that ask for it (``ANARCHON_TEST_AUTODISCOVER``): the other tests see no
declared handler."""

from __future__ import annotations

from anarchon import RunContext
from anarchon_django import handler
from tests.django.testapp.handlers import _write


@handler("testapp-report")
def testapp_report(ctx: RunContext) -> None:
    """Logs each run of a dynamic job to ``$ANARCHON_TEST_LOG``."""
    _write(kind="dynamic", job=ctx.name, params=ctx.params, instance=ctx.instance_id)
