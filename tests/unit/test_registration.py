"""Registration forms: module-level decorators, named schedulers, decorated methods and
``register(obj, prefix=, defaults=)`` (docs/contract.md, *Registering jobs*)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

import anarchon

from ._doubles import MemoryClaimBackend

UTC = timezone.utc
AFTER = datetime(2026, 1, 1, tzinfo=UTC)
_counter = itertools.count()


@pytest.fixture(autouse=True)
def _clean_registry() -> Iterator[None]:
    anarchon.stop_all()
    yield
    anarchon.stop_all()


@pytest.fixture
def name() -> str:
    """A scheduler name no other test uses."""
    return f"unit-{next(_counter)}"


@pytest.fixture
def db(tmp_path: Path) -> str:
    return str(tmp_path / "x.db")


def _handler(ctx: anarchon.RunContext) -> None:
    return None


# -- module-level decorators on named schedulers ------------------------------------------------

def test_module_decorators_before_configure(name: str, db: str, tmp_path: Path) -> None:
    @anarchon.every("tick", "10s", scheduler=name)
    def tick(ctx: anarchon.RunContext) -> None:
        return None

    @anarchon.cron("digest", "0 9 * * *", scheduler=name, timezone="Europe/Berlin")
    async def digest(ctx: anarchon.RunContext) -> None:
        return None

    @anarchon.at(None, "2030-01-01T00:00:00Z", scheduler=name)
    def launch(ctx: anarchon.RunContext) -> None:
        return None

    assert callable(tick) and callable(digest) and callable(launch)
    with pytest.raises(LookupError, match=name):
        anarchon.get_scheduler(name)
    scheduler = anarchon.configure(name, backend=anarchon.SqliteBackend(db))
    assert anarchon.get_scheduler(name) is scheduler
    assert scheduler.job_names == ["tick", "digest", "launch"]
    assert scheduler.next_runs("digest", 1, after=AFTER)[0].hour == 8
    assert list(tmp_path.iterdir()) == []  # configure does no I/O


def test_module_decorators_after_configure(name: str, db: str) -> None:
    scheduler = anarchon.configure(name, backend=anarchon.SqliteBackend(db), jitter=0)

    def tick(ctx: anarchon.RunContext) -> None:
        return None

    assert anarchon.every("tick", "10s", scheduler=name)(tick) is tick
    anarchon.cron("hourly", "0 * * * *", _handler, scheduler=name)
    assert scheduler.job_names == ["tick", "hourly"]
    assert scheduler.next_runs("tick", 1, after=AFTER) == [datetime(2026, 1, 1, 0, 0, 10,
                                                                    tzinfo=UTC)]


def test_module_decorators_check_options_at_once(name: str) -> None:
    with pytest.raises(ValueError, match="'bad'"):
        anarchon.every("bad", "0s", scheduler=name)
    with pytest.raises(TypeError, match="retries"):
        anarchon.every("bad", "10s", scheduler=name, retries=2)  # type: ignore[call-overload]
    with pytest.raises(ValueError, match="Nowhere/City"):
        anarchon.cron("bad", "0 * * * *", scheduler=name, timezone="Nowhere/City")
    with pytest.raises(TypeError, match="overlap"):
        anarchon.at("bad", "2030-01-01T00:00:00Z", scheduler=name, overlap="skip")
    with pytest.raises(TypeError, match="scheduler"):
        anarchon.every("bad", "10s", scheduler=42)  # type: ignore[call-overload]


def test_duplicate_on_a_pending_name(name: str) -> None:
    anarchon.every("dup", "10s", _handler, scheduler=name)
    with pytest.raises(ValueError, match="'dup'"):
        anarchon.cron("dup", "0 * * * *", _handler, scheduler=name)


def test_configure_twice_is_a_value_error(name: str, db: str) -> None:
    anarchon.configure(name, backend=anarchon.SqliteBackend(db))
    with pytest.raises(ValueError, match=name):
        anarchon.configure(name, backend=anarchon.SqliteBackend(db))


def test_configure_without_backend_is_a_type_error(name: str) -> None:
    with pytest.raises(TypeError, match="backend"):
        anarchon.configure(name)


def test_configure_with_claim_only_backend_refuses_pending_lease_options(name: str,
                                                                          db: str) -> None:
    anarchon.every("retrying", "10s", _handler, scheduler=name, max_attempts=1)
    with pytest.raises(TypeError, match="max_attempts") as info:
        anarchon.configure(name, backend=MemoryClaimBackend())
    assert "memory:claim" in str(info.value)
    with pytest.raises(LookupError):
        anarchon.get_scheduler(name)
    # the pending job survived the failed configure
    scheduler = anarchon.configure(name, backend=anarchon.SqliteBackend(db))
    assert scheduler.job_names == ["retrying"]


def test_start_all_with_jobs_on_an_unconfigured_name(name: str) -> None:
    anarchon.every("orphan", "10s", _handler, scheduler=name)
    with pytest.raises(TypeError, match=name):
        anarchon.start_all()


def test_plain_function_with_scheduler_none_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="scheduler=None"):
        anarchon.every("x", "10s", scheduler=None)(_handler)
    with pytest.raises(TypeError, match="scheduler"):
        anarchon.every("x", "10s", _handler, scheduler=None)


# -- decorated methods --------------------------------------------------------------------------

def test_methods_register_on_construction_with_default_names(db: str) -> None:
    s = anarchon.Scheduler(backend=anarchon.SqliteBackend(db))

    class Billing:
        def __init__(self, rate: int) -> None:
            self.rate = rate

        @s.every("billing-charge", "10s")
        def charge(self, ctx: anarchon.RunContext) -> int:
            return self.rate

        @s.cron(None, "0 * * * *")
        def report(self, ctx: anarchon.RunContext) -> None:
            return None

    assert s.job_names == []  # nothing until an instance exists
    billing = Billing(rate=3)
    assert s.job_names == ["billing-charge", "Billing-report"]
    assert billing.rate == 3
    assert billing.charge(None) == 3  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="billing-charge"):
        Billing(rate=4)


def test_stacked_decorators_on_one_method(db: str) -> None:
    s = anarchon.Scheduler(backend=anarchon.SqliteBackend(db))

    class Worker:
        @s.every("fast", "10s")
        @s.cron("slow", "0 0 * * *")
        def work(self, ctx: anarchon.RunContext) -> None:
            return None

    Worker()
    assert sorted(s.job_names) == ["fast", "slow"]


def test_subclass_instances_register_with_the_subclass_name(db: str) -> None:
    s = anarchon.Scheduler(backend=anarchon.SqliteBackend(db))

    class Base:
        @s.every(None, "10s")
        def tick(self, ctx: anarchon.RunContext) -> None:
            return None

    class Child(Base):
        def __init__(self) -> None:
            super().__init__()
            self.ready = True

    Child()
    Base()
    assert sorted(s.job_names) == ["Base-tick", "Child-tick"]


def test_methods_on_a_named_scheduler(name: str, db: str) -> None:
    class Reports:
        @anarchon.cron("reports-daily", "0 6 * * *", scheduler=name)
        def daily(self, ctx: anarchon.RunContext) -> None:
            return None

        @anarchon.every(interval="1m", scheduler=name)
        def poll(self, ctx: anarchon.RunContext) -> None:
            return None

    Reports()  # before configure: the jobs wait on the name
    with pytest.raises(ValueError, match="reports-daily"):
        Reports()
    scheduler = anarchon.configure(name, backend=anarchon.SqliteBackend(db))
    assert scheduler.job_names == ["reports-daily", "Reports-poll"]


def test_scheduler_none_marks_only_and_register_prefixes(db: str) -> None:
    s = anarchon.Scheduler(backend=anarchon.SqliteBackend(db), data={"base": True})

    class Tenant:
        def __init__(self, tenant: str) -> None:
            self.tenant = tenant

        @anarchon.every("sync", "10s", scheduler=None, data={"k": "mark", "only_mark": 1})
        def sync(self, ctx: anarchon.RunContext) -> None:
            return None

        @anarchon.cron(None, "0 9 * * *", scheduler=None)
        def report(self, ctx: anarchon.RunContext) -> None:
            return None

    acme, umbrella = Tenant("acme"), Tenant("umbrella")
    assert s.job_names == []  # scheduler=None only marks
    names = s.register(acme, prefix="acme-",
                       defaults={"data": {"tenant": "acme", "k": "default"},
                                 "timezone": "Europe/Berlin", "offset": "2s"})
    assert names == ["acme-sync", "acme-Tenant-report"]
    s.register(umbrella, prefix="umbrella-", defaults={"data": {"tenant": "umbrella"}})
    assert s.job_names == ["acme-sync", "acme-Tenant-report", "umbrella-sync",
                           "umbrella-Tenant-report"]
    # timezone applies to the cron job only, offset to the every job only
    assert s.next_runs("acme-Tenant-report", 1, after=AFTER)[0].hour == 8
    assert s.next_runs("umbrella-Tenant-report", 1, after=AFTER)[0].hour == 9
    assert s.next_runs("acme-sync", 1, after=AFTER)[0].second == 2
    assert s.next_runs("umbrella-sync", 1, after=AFTER)[0].second == 10
    # data: defaults merge under the mark's own keys
    core = s.core
    assert core.runtime.jobs["acme-sync"].data == {"tenant": "acme", "k": "mark", "only_mark": 1}
    assert core.runtime.jobs["acme-Tenant-report"].data == {"tenant": "acme", "k": "default"}
    assert core.runtime.jobs["umbrella-sync"].data == {"tenant": "umbrella", "k": "mark",
                                                       "only_mark": 1}
    # a second object without a distinct prefix collides
    with pytest.raises(ValueError, match="acme-sync"):
        s.register(Tenant("acme2"), prefix="acme-")


def test_register_checks(db: str) -> None:
    s = anarchon.Scheduler(backend=anarchon.SqliteBackend(db))

    class Plain:
        def method(self) -> None:
            return None

    with pytest.raises(ValueError, match="Plain"):
        s.register(Plain())
    with pytest.raises(TypeError, match="prefix"):
        s.register(Plain(), prefix=5)  # type: ignore[arg-type]


def test_register_bad_defaults_are_refused(db: str) -> None:
    s = anarchon.Scheduler(backend=anarchon.SqliteBackend(db))

    class Tenant:
        @anarchon.cron("report", "0 9 * * *", scheduler=None)
        def report(self, ctx: anarchon.RunContext) -> None:
            return None

    with pytest.raises(ValueError, match="Nowhere/City"):
        s.register(Tenant(), prefix="x-", defaults={"timezone": "Nowhere/City"})
    with pytest.raises(TypeError, match="bogus"):
        s.register(Tenant(), prefix="y-", defaults={"bogus": 1})
    assert s.job_names == []


# -- run data reaches the handler (opens the SQLite file in tmp_path) ---------------------------

def _run_now(s: anarchon.Scheduler, job: str, data: Any = None, **kwargs: Any) -> None:
    try:
        record = s.run_now(job, data, **kwargs)
        assert record.status == "success", record.error
        assert record.manual and record.reason == "manual"
    finally:
        s.close()


def test_run_now_merges_scheduler_job_and_run_data(db: str) -> None:
    seen: list[Any] = []
    s = anarchon.Scheduler(backend=anarchon.SqliteBackend(db),
                           data={"client": "shared", "level": "scheduler", "s": 1})
    s.every("j", "10s", lambda ctx: seen.append(ctx.data), data={"level": "job", "j": 2})
    _run_now(s, "j", {"level": "run", "r": 3})
    assert seen == [{"client": "shared", "level": "run", "s": 1, "j": 2, "r": 3}]


def test_registered_method_sees_self_and_merged_defaults(db: str) -> None:
    seen: list[tuple[str, Any]] = []
    s = anarchon.Scheduler(backend=anarchon.SqliteBackend(db))

    class Tenant:
        def __init__(self, tenant: str) -> None:
            self.tenant = tenant

        @anarchon.every("sync", "10s", scheduler=None, data={"k": "mark"})
        def sync(self, ctx: anarchon.RunContext) -> None:
            seen.append((self.tenant, ctx.data))

    s.register(Tenant("acme"), prefix="acme-",
               defaults={"data": {"tenant": "acme", "k": "default"}})
    _run_now(s, "acme-sync", {"extra": 1})
    assert seen == [("acme", {"tenant": "acme", "k": "mark", "extra": 1})]


def test_callable_data_is_called_per_run_and_merged(db: str) -> None:
    calls: list[int] = []
    seen: list[Any] = []

    def fresh() -> dict[str, Any]:
        calls.append(1)
        return {"fresh": len(calls)}

    s = anarchon.Scheduler(backend=anarchon.SqliteBackend(db), data={"s": 1})
    s.every("j", "10s", lambda ctx: seen.append(ctx.data), data=fresh)
    try:
        s.run_now("j", {"r": 1})
        s.run_now("j", {"r": 2})
    finally:
        s.close()
    assert seen == [{"s": 1, "fresh": 1, "r": 1}, {"s": 1, "fresh": 2, "r": 2}]


def test_callable_data_that_raises_fails_the_run(db: str) -> None:
    ran: list[bool] = []

    def broken() -> dict[str, Any]:
        raise RuntimeError("secret store down")

    s = anarchon.Scheduler(backend=anarchon.SqliteBackend(db))
    s.every("j", "10s", lambda ctx: ran.append(True), data=broken)
    try:
        record = s.run_now("j", {"r": 1})
    finally:
        s.close()
    assert record.status == "failure"
    assert record.error is not None and "secret store down" in record.error
    assert ran == []


def test_run_now_without_data_keeps_job_data(db: str) -> None:
    seen: list[Any] = []
    s = anarchon.Scheduler(backend=anarchon.SqliteBackend(db), data={"s": 1})
    s.every("j", "10s", lambda ctx: seen.append(ctx.data), data={"j": 2})
    _run_now(s, "j")
    assert seen == [{"s": 1, "j": 2}]
