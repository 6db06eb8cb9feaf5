"""``celery -A proj anarchon``: which scheduler ``celery beat`` and ``celery worker -B``
use, and anarchon's store. Registered in the ``celery.commands`` entry-point group, so
every ``celery`` command line imports this module, which connects the check that refuses
``celery worker -B -S anarchon`` (see ``anarchon_celery.beat.embedded``)."""

from __future__ import annotations

from typing import Any

import click

from anarchon_celery.beat.embedded import connect, is_anarchon_scheduler

connect()


@click.command("anarchon")
@click.pass_context
def anarchon(ctx: Any) -> None:
    """anarchon_celery: the beat scheduler in use and anarchon's store."""
    from anarchon_celery.beat.config import resolve

    app = ctx.obj.app
    scheduler = app.conf.beat_scheduler
    click.echo(f"beat_scheduler: {scheduler}"
               + ("" if is_anarchon_scheduler(scheduler) else
                  " (not anarchon's: pass -S anarchon to celery beat, --scheduler anarchon "
                  "to celery worker -B)"))
    try:
        click.echo(f"anarchon store: {resolve(app).describe()}")
    except Exception as exc:  # a command line: one clear line
        raise click.ClickException(f"anarchon store not configured: {exc}") from None


__all__ = ["anarchon"]
