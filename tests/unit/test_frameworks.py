"""``JobInfo.framework``: which layer declared a job, on ``jobs()`` here and from the store,
for code-declared and dynamic jobs; its stored form (``anarchon.backends.frameworks``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from anarchon import AsyncScheduler, RunContext, SqliteBackend
from anarchon.backends.base import JobSpec
from anarchon.backends.frameworks import (
    check_framework,
    handler_framework,
    shown,
    stored_kind,
    stored_spec,
)
from tests.support import run


def noop(ctx: RunContext) -> None:
    """A job that does nothing."""


def test_the_stored_kind_carries_the_framework_and_old_rows_read_as_plain() -> None:
    celery = JobSpec("entry", "cron", "cron '0 3 * * *' (UTC)", "celery")
    assert stored_kind(celery) == "celery:cron"
    assert stored_spec("entry", "celery:cron", celery.schedule) == celery
    plain = JobSpec("greet", "every", "every 1h")
    assert stored_kind(plain) == "every"
    assert stored_spec("greet", "every", "every 1h") == plain
    # what stores held before frameworks were recorded, and kinds that only look alike
    assert stored_spec("x", "refused", "refused: why").framework is None
    assert stored_spec("x", "Odd:kind", "s") == JobSpec("x", "Odd:kind", "s")
    assert stored_spec("x", "celery:", "s") == JobSpec("x", "celery:", "s")
    assert stored_spec("x", "", "s") == JobSpec("x", "", "s")


def test_handler_names_mark_dynamic_jobs_of_the_frameworks_only() -> None:
    assert handler_framework("celery:publish") == "celery"
    assert handler_framework("dramatiq:refresh") == "dramatiq"
    assert handler_framework("reports:daily") is None  # a user's own namespace
    assert handler_framework("report") is None and handler_framework(None) is None
    assert (shown(None), shown("celery")) == ("plain", "celery")


@pytest.mark.parametrize(("bad", "error"), [("Celery", ValueError), ("cel:ery", ValueError),
                                            ("", ValueError), ("x" * 17, ValueError),
                                            (3, TypeError)])
def test_a_framework_name_is_checked(bad: Any, error: type[Exception]) -> None:
    with pytest.raises(error, match="framework"):
        check_framework(bad)
    scheduler = AsyncScheduler(SqliteBackend(":memory:"))
    with pytest.raises(error, match="framework"):
        scheduler.declare_job("every", "job", "1h", noop, {}, framework=bad)
    assert scheduler.job_names == []


def test_jobs_show_the_framework_here_in_the_store_and_of_dynamic_jobs(tmp_path: Path) -> None:
    path = str(tmp_path / "frameworks.db")

    async def scenario() -> None:
        declaring = AsyncScheduler(SqliteBackend(path), instance_id="beat-1", jitter=0)
        declaring.every("plain-job", "1h", noop)
        declaring.declare_job("every", "beat-entry", "1h", noop, {}, framework="celery")
        declaring.declare_job("cron", "marked-actor", "0 3 * * *", noop,
                              {"timezone": "UTC"}, framework="dramatiq")
        here = {info.name: info.framework for info in await declaring.jobs()}
        assert here == {"plain-job": None, "beat-entry": "celery",
                        "marked-actor": "dramatiq"}
        await declaring.start()  # registers the jobs in the store
        await declaring.stop()

        reader = AsyncScheduler(SqliteBackend(path), instance_id="reader")  # no jobs
        await reader.add_job("dyn-entry", handler="celery:publish", every="1h")
        await reader.add_job("dyn-actor", handler="dramatiq:refresh", every="1h")
        await reader.add_job("dyn-plain", handler="report", every="1h")
        await reader.reschedule("beat-entry", every="2h")  # an override keeps it
        infos = {info.name: info for info in await reader.jobs()}
        assert {name: info.framework for name, info in infos.items()} == {
            "plain-job": None, "beat-entry": "celery", "marked-actor": "dramatiq",
            "dyn-entry": "celery", "dyn-actor": "dramatiq", "dyn-plain": None}
        assert (infos["beat-entry"].source, infos["beat-entry"].kind) == ("override",
                                                                          "every")
        assert infos["marked-actor"].kind == "cron"  # the kind, without the framework

        # a dynamic job run here is registered with its handler's framework
        offering = AsyncScheduler(SqliteBackend(path), instance_id="worker-1", jitter=0)
        offering.handler("dramatiq:refresh", noop)
        await offering.start()
        assert {s.name: s.framework for s in await offering.backend.known_jobs()
                }.get("dyn-actor") == "dramatiq"
        await offering.stop()
        await reader.stop()

    run(scenario())
