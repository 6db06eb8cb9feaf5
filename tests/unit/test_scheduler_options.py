"""Scheduler and job options through the public API (docs/contract.md:
*Registering jobs*, *Options*, *Precise behaviour*). No I/O happens."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

import anarchon

from ._doubles import MemoryClaimBackend

UTC = timezone.utc
AFTER = datetime(2026, 1, 1, tzinfo=UTC)


def handler(ctx: anarchon.RunContext) -> None:
    return None


def _add(scheduler: anarchon.Scheduler, kind: str, form: str, when: Any,
         options: dict[str, Any]) -> None:
    """Register job "my-job" chained (with a handler) or as a decorator (options checked)."""
    method: Callable[..., Any] = getattr(scheduler, kind)
    if form == "chained":
        method("my-job", when, handler, **options)
    else:
        method("my-job", when, **options)


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "x.db"
    yield path
    # Nothing in these tests may touch the database.
    assert not path.exists()
    assert list(tmp_path.iterdir()) == []


@pytest.fixture
def scheduler(db: Path) -> anarchon.Scheduler:
    return anarchon.Scheduler(backend=anarchon.SqliteBackend(str(db)))


# -- construction -------------------------------------------------------------------------------

def test_scheduler_without_backend_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="backend"):
        anarchon.Scheduler()
    with pytest.raises(TypeError, match="backend"):
        anarchon.AsyncScheduler()


def test_scheduler_with_a_non_backend_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="backend"):
        anarchon.Scheduler(backend="sqlite:///x.db")  # type: ignore[arg-type]


def test_construct_and_register_does_no_io(db: Path) -> None:
    s = anarchon.Scheduler(backend=anarchon.SqliteBackend(str(db)), lease="10s", heartbeat="1s")
    s.every("a", "10s", handler).cron("b", "0 * * * *", handler)
    s.at("c", "2030-01-01T00:00:00Z", handler)
    assert s.next_runs("a", 1, after=AFTER) == [AFTER + timedelta(seconds=10)]
    assert not db.exists()


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"lease": "5s", "heartbeat": "5s"}, "heartbeat"),
        ({"lease": "5s", "heartbeat": "10s"}, "heartbeat"),
        ({"lease": 3, "heartbeat": 5}, "heartbeat"),  # default heartbeat 5 s vs lease 3 s
        ({"lease": 0}, "lease"),
        ({"lease": "-1s"}, "lease"),
        ({"heartbeat": 0}, "heartbeat"),
        ({"lease": "abc"}, "lease"),
        ({"jitter": "-1s"}, "jitter"),
        ({"max_late": "soon"}, "max_late"),
        ({"timeout": 0}, "timeout"),
        ({"timezone": "Nowhere/City"}, "Nowhere/City"),
        ({"overlap": "sometimes"}, "overlap"),
        ({"max_attempts": 0}, "max_attempts"),
        ({"history_size": 0}, "history_size"),
        ({"history_ttl": "0s"}, "history_ttl"),
        ({"catch_up": "-5m"}, "catch_up"),
    ],
)
def test_bad_scheduler_option_values(db: Path, options: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        anarchon.Scheduler(backend=anarchon.SqliteBackend(str(db)), **options)


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"leese": "30s"}, "leese"),
        ({"interval": "10s"}, "interval"),
        ({"lease": None}, "lease"),
        ({"jitter": [1]}, "jitter"),
        ({"max_attempts": "3"}, "max_attempts"),
        ({"max_attempts": True}, "max_attempts"),
        ({"timezone": 5}, "timezone"),
    ],
)
def test_wrong_scheduler_option_types(db: Path, options: dict[str, Any], match: str) -> None:
    with pytest.raises(TypeError, match=match):
        anarchon.Scheduler(backend=anarchon.SqliteBackend(str(db)), **options)


def test_valid_scheduler_options(db: Path) -> None:
    s = anarchon.Scheduler(backend=anarchon.SqliteBackend(str(db)), lease="1m",
                           heartbeat=timedelta(seconds=10), jitter=0, max_late="2m",
                           timeout="1h", history_size=5, history_ttl="7d", catch_up=0,
                           offset="3s", timezone="Europe/Berlin", data={"a": 1},
                           instance_id="me")
    assert s.instance_id == "me"
    assert s.backend.name == "sqlite"


def test_empty_instance_id_is_a_value_error(db: Path) -> None:
    with pytest.raises(ValueError, match="instance_id"):
        anarchon.Scheduler(backend=anarchon.SqliteBackend(str(db)), instance_id="")


@pytest.mark.parametrize("instance_id", [5, b"me"], ids=repr)
def test_non_str_instance_id_is_a_type_error(db: Path, instance_id: Any) -> None:
    with pytest.raises(TypeError, match="instance_id"):
        anarchon.Scheduler(backend=anarchon.SqliteBackend(str(db)), instance_id=instance_id)


def test_default_instance_id_is_unique_per_scheduler(db: Path) -> None:
    a = anarchon.Scheduler(backend=anarchon.SqliteBackend(str(db)))
    b = anarchon.Scheduler(backend=anarchon.SqliteBackend(str(db)))
    assert a.instance_id != b.instance_id
    assert a.instance_id.count(":") >= 2  # host:pid:random


# -- job options: bad values --------------------------------------------------------------------

BAD_JOB_VALUES: list[tuple[str, str, Any, dict[str, Any], str]] = [
    # (id, kind, when, options, text that must appear besides the job name)
    ("every-zero", "every", 0, {}, "interval"),
    ("every-zero-str", "every", "0s", {}, "interval"),
    ("every-sub-ms", "every", "0.0001", {}, "interval"),
    ("every-zero-td", "every", timedelta(0), {}, "interval"),
    ("every-negative", "every", -10, {}, "-10"),
    ("every-negative-str", "every", "-5s", {}, "'-5s'"),
    ("every-garbage", "every", "abc", {}, "'abc'"),
    ("every-nan", "every", float("nan"), {}, "nan"),
    ("every-bad-jitter", "every", "10s", {"jitter": "-1s"}, "jitter"),
    ("every-bad-max-late", "every", "10s", {"max_late": "1x"}, "max_late"),
    ("every-bad-offset", "every", "10s", {"offset": "-3s"}, "offset"),
    ("every-bad-timeout", "every", "10s", {"timeout": 0}, "timeout"),
    ("every-bad-overlap", "every", "10s", {"overlap": "never"}, "overlap"),
    ("every-bad-attempts", "every", "10s", {"max_attempts": 0}, "max_attempts"),
    ("every-bad-catch-up", "every", "10s", {"catch_up": "forever"}, "catch_up"),
    ("every-bad-history", "every", "10s", {"history_size": -1}, "history_size"),
    ("every-bad-history-ttl", "every", "10s", {"history_ttl": "-1d"}, "history_ttl"),
    ("cron-4-fields", "cron", "* * * *", {}, "'* * * *'"),
    ("cron-out-of-range", "cron", "61 * * * *", {}, "'61 * * * *'"),
    ("cron-letters", "cron", "a b c d e", {}, "'a b c d e'"),
    ("cron-unknown-tz", "cron", "0 * * * *", {"timezone": "Nowhere/City"}, "'Nowhere/City'"),
    ("at-naive-str", "at", "2026-12-24T18:00:00", {}, "naive"),
    ("at-naive-dt", "at", datetime(2026, 12, 24, 18), {}, "naive"),
    ("at-garbage", "at", "christmas", {}, "'christmas'"),
]


@pytest.mark.parametrize(("kind", "when", "options", "text"),
                         [case[1:] for case in BAD_JOB_VALUES],
                         ids=[case[0] for case in BAD_JOB_VALUES])
@pytest.mark.parametrize("form", ["chained", "decorator"])
def test_bad_job_values(scheduler: anarchon.Scheduler, kind: str, when: Any,
                        options: dict[str, Any], text: str, form: str) -> None:
    with pytest.raises(ValueError, match="my-job") as info:
        _add(scheduler, kind, form, when, options)
    message = str(info.value)
    assert "'my-job'" in message
    assert text in message
    assert scheduler.job_names == []


BAD_JOB_TYPES: list[tuple[str, str, Any, dict[str, Any], str]] = [
    ("every-list", "every", [10], {}, "interval"),
    ("every-bool", "every", True, {}, "interval"),
    ("every-dict", "every", {"s": 10}, {}, "interval"),
    ("cron-int", "cron", 5, {}, "cron"),
    ("cron-list", "cron", ["0", "*", "*", "*", "*"], {}, "cron"),
    ("at-list", "at", [2026], {}, "at"),
    ("at-bool", "at", True, {}, "bool"),
    ("jitter-list", "every", "10s", {"jitter": [1]}, "jitter"),
    ("attempts-str", "every", "10s", {"max_attempts": "3"}, "max_attempts"),
    ("attempts-float", "every", "10s", {"max_attempts": 3.0}, "max_attempts"),
    ("history-bool", "every", "10s", {"history_size": True}, "history_size"),
    ("tz-int", "cron", "0 * * * *", {"timezone": 1}, "timezone"),
    ("unknown-option", "every", "10s", {"retries": 3}, "retries"),
    ("unit-suffix-option", "every", "10s", {"timeout_ms": 5}, "timeout_ms"),
    ("lease-on-job", "every", "10s", {"lease": "30s"}, "lease"),
    ("overlap-on-at", "at", "2030-01-01T00:00:00Z", {"overlap": "skip"}, "overlap"),
    ("offset-on-cron", "cron", "0 * * * *", {"offset": "5s"}, "offset"),
    ("offset-on-at", "at", "2030-01-01T00:00:00Z", {"offset": "5s"}, "offset"),
    ("timezone-on-every", "every", "10s", {"timezone": "UTC"}, "timezone"),
]


@pytest.mark.parametrize(("kind", "when", "options", "text"),
                         [case[1:] for case in BAD_JOB_TYPES],
                         ids=[case[0] for case in BAD_JOB_TYPES])
@pytest.mark.parametrize("form", ["chained", "decorator"])
def test_wrong_job_types_and_options(scheduler: anarchon.Scheduler, kind: str, when: Any,
                                     options: dict[str, Any], text: str, form: str) -> None:
    with pytest.raises(TypeError) as info:
        _add(scheduler, kind, form, when, options)
    message = str(info.value)
    assert "'my-job'" in message
    assert text in message
    assert scheduler.job_names == []


@pytest.mark.parametrize("kind", ["every", "cron", "at"])
def test_missing_schedule_is_a_type_error(scheduler: anarchon.Scheduler, kind: str) -> None:
    with pytest.raises(TypeError, match="my-job"):
        getattr(scheduler, kind)("my-job")


@pytest.mark.parametrize(("name", "error"), [("", ValueError), (" padded ", ValueError),
                                             ("a\x00b", ValueError), ("x" * 201, ValueError),
                                             (5, TypeError), (b"job", TypeError)], ids=repr)
def test_bad_job_names(scheduler: anarchon.Scheduler, name: Any,
                       error: type[Exception]) -> None:
    with pytest.raises(error):
        scheduler.every(name, "10s", handler)
    assert scheduler.job_names == []


@pytest.mark.parametrize("name", ["a", "billing.daily", "tenant acme/report", "ünïcode", "x" * 200])
def test_any_non_empty_name_on_lease_backends(scheduler: anarchon.Scheduler, name: str) -> None:
    scheduler.every(name, "10s", handler)
    assert scheduler.job_names == [name]


def test_handler_must_be_callable(scheduler: anarchon.Scheduler) -> None:
    with pytest.raises(TypeError, match="my-job"):
        scheduler.every("my-job", "10s", "not callable")  # type: ignore[call-overload]
    with pytest.raises(TypeError):
        scheduler.every("my-job", "10s")("not callable")  # type: ignore[type-var]


def test_duplicate_job_name_is_a_value_error(scheduler: anarchon.Scheduler) -> None:
    scheduler.every("dup", "10s", handler)
    attempts: list[Callable[[], object]] = [
        lambda: scheduler.every("dup", "5s", handler),
        lambda: scheduler.cron("dup", "0 * * * *", handler),
        lambda: scheduler.at("dup", "2030-01-01T00:00:00Z", handler),
        lambda: scheduler.every("dup", "5s")(handler),
    ]
    for register in attempts:
        with pytest.raises(ValueError, match="'dup'"):
            register()
    assert scheduler.job_names == ["dup"]


def test_remove_then_register_again(scheduler: anarchon.Scheduler) -> None:
    scheduler.every("a", "10s", handler)
    scheduler.remove("a")
    assert scheduler.job_names == []
    scheduler.every("a", "20s", handler)
    assert scheduler.next_runs("a", 1, after=AFTER) == [AFTER + timedelta(seconds=20)]
    with pytest.raises(anarchon.JobNotFoundError):
        scheduler.remove("nope")


# -- registration forms -------------------------------------------------------------------------

def test_chainable_form_returns_the_scheduler(scheduler: anarchon.Scheduler) -> None:
    result = (scheduler.every("a", "10s", handler)
              .cron("b", "0 * * * *", handler, timezone="Europe/Berlin")
              .at("c", 1_900_000_000, handler))
    assert result is scheduler
    assert scheduler.job_names == ["a", "b", "c"]


def test_async_scheduler_chainable_form_returns_itself(db: Path) -> None:
    s = anarchon.AsyncScheduler(anarchon.SqliteBackend(str(db)))
    assert s.every("a", "10s", handler) is s


def test_decorator_form_returns_the_function_unchanged(scheduler: anarchon.Scheduler) -> None:
    def tick(ctx: anarchon.RunContext) -> str:
        return "tick"

    async def digest(ctx: anarchon.RunContext) -> None:
        return None

    assert scheduler.every("tick", "10s")(tick) is tick
    assert scheduler.cron("digest", "0 */2 * * *", timezone="Europe/Berlin")(digest) is digest
    assert scheduler.at(None, "2030-01-01T00:00:00Z")(handler) is handler  # named after it
    assert scheduler.job_names == ["tick", "digest", "handler"]
    assert tick(None) == "tick"  # type: ignore[arg-type]


def test_decorator_checks_options_before_decorating(scheduler: anarchon.Scheduler) -> None:
    with pytest.raises(ValueError, match="bad"):
        scheduler.every("bad", "10s", jitter="soon")
    with pytest.raises(TypeError, match="bad"):
        scheduler.cron("bad", "0 * * * *", offset=1)


# -- next_runs / next_run -----------------------------------------------------------------------

@pytest.mark.parametrize(
    ("kind", "when", "options", "after", "expected"),
    [
        ("every", "10s", {}, AFTER, ["00:00:10", "00:00:20", "00:00:30"]),
        ("every", 10, {"offset": "3s"}, AFTER, ["00:00:03", "00:00:13", "00:00:23"]),
        ("every", timedelta(minutes=35), {}, AFTER, ["00:35:00", "01:10:00", "01:45:00"]),
        ("every", "10s", {}, AFTER + timedelta(seconds=10), ["00:00:20", "00:00:30",
                                                            "00:00:40"]),
        ("cron", "0 * * * *", {}, AFTER, ["01:00:00", "02:00:00", "03:00:00"]),
        ("cron", "0 9 * * *", {"timezone": "Europe/Berlin"}, AFTER,
         ["08:00:00", "08:00:00", "08:00:00"]),
        ("cron", "*/20 * * * * *", {}, AFTER, ["00:00:20", "00:00:40", "00:01:00"]),
        ("cron", "0 9 * * *", {"timezone": "Asia/Kolkata"},
         datetime(2026, 1, 1, 5, 0, tzinfo=timezone(timedelta(hours=5, minutes=30))),
         ["03:30:00", "03:30:00", "03:30:00"]),
    ],
)
def test_next_runs_are_aware_utc(scheduler: anarchon.Scheduler, kind: str, when: Any,
                                 options: dict[str, Any], after: datetime,
                                 expected: list[str]) -> None:
    getattr(scheduler, kind)("job", when, handler, **options)
    runs = scheduler.next_runs("job", 3, after=after)
    assert [r.strftime("%H:%M:%S") for r in runs] == expected
    for run in runs:
        assert run.tzinfo is UTC
        assert run > after
    assert runs == sorted(runs)


def test_next_runs_follow_dst(scheduler: anarchon.Scheduler) -> None:
    scheduler.cron("gap", "30 2 * * *", handler, timezone="Europe/Berlin")
    scheduler.cron("hourly", "0 * * * *", handler, timezone="America/New_York")
    gap = scheduler.next_runs("gap", 3, after=datetime(2026, 3, 28, tzinfo=UTC))
    assert [r.isoformat() for r in gap] == ["2026-03-28T01:30:00+00:00",
                                            "2026-03-29T01:30:00+00:00",
                                            "2026-03-30T00:30:00+00:00"]
    hourly = scheduler.next_runs("hourly", 3, after=datetime(2026, 11, 1, 4, 30, tzinfo=UTC))
    assert [r.isoformat() for r in hourly] == ["2026-11-01T05:00:00+00:00",
                                               "2026-11-01T06:00:00+00:00",
                                               "2026-11-01T07:00:00+00:00"]


def test_scheduler_level_defaults_apply_to_jobs(db: Path) -> None:
    s = anarchon.Scheduler(backend=anarchon.SqliteBackend(str(db)), timezone="Europe/Berlin",
                           offset="3s")
    s.cron("berlin", "0 9 * * *", handler)
    s.cron("utc", "0 9 * * *", handler, timezone="UTC")
    s.every("shifted", "10s", handler)
    s.every("unshifted", "10s", handler, offset=0)
    assert s.next_runs("berlin", 1, after=AFTER)[0].hour == 8
    assert s.next_runs("utc", 1, after=AFTER)[0].hour == 9
    assert s.next_runs("shifted", 1, after=AFTER)[0].second == 3
    assert s.next_runs("unshifted", 1, after=AFTER)[0].second == 10


def test_next_runs_count_and_exhausted_at(scheduler: anarchon.Scheduler) -> None:
    scheduler.every("e", "1m", handler)
    scheduler.at("once", "2026-06-01T12:00:00+02:00", handler)
    assert scheduler.next_runs("e", 0, after=AFTER) == []
    assert len(scheduler.next_runs("e", 7, after=AFTER)) == 7
    assert len(scheduler.next_runs("e", after=AFTER)) == 5  # default count
    assert scheduler.next_runs("once", 3, after=AFTER) == [datetime(2026, 6, 1, 10, tzinfo=UTC)]
    assert scheduler.next_runs("once", 3, after=datetime(2026, 6, 1, 10, tzinfo=UTC)) == []


def test_next_runs_argument_errors(scheduler: anarchon.Scheduler) -> None:
    scheduler.every("e", "1m", handler)
    with pytest.raises(ValueError, match="aware"):
        scheduler.next_runs("e", 1, after=datetime(2026, 1, 1))
    with pytest.raises(TypeError, match="after"):
        scheduler.next_runs("e", 1, after="2026-01-01T00:00:00Z")  # type: ignore[arg-type]


@pytest.mark.parametrize("method", ["next_runs", "next_run", "remove"])
def test_unknown_job_raises_job_not_found(scheduler: anarchon.Scheduler, method: str) -> None:
    scheduler.every("known", "1m", handler)
    with pytest.raises(anarchon.JobNotFoundError, match="nope") as info:
        getattr(scheduler, method)("nope")
    assert isinstance(info.value, ValueError)
    assert isinstance(info.value, LookupError)


def test_next_run_uses_the_injected_clock(db: Path) -> None:
    clock = anarchon.FakeClock(start=1_767_225_605.0)  # 2026-01-01T00:00:05Z
    s = anarchon.Scheduler(backend=anarchon.SqliteBackend(str(db)), clock=clock)
    s.every("e", "10s", handler)
    s.at("past", "2025-01-01T00:00:00Z", handler)
    nxt = s.next_run("e")
    assert nxt == datetime(2026, 1, 1, 0, 0, 10, tzinfo=UTC)
    assert nxt is not None and nxt.tzinfo is UTC
    assert s.next_runs("e", 2) == [datetime(2026, 1, 1, 0, 0, 10, tzinfo=UTC),
                                   datetime(2026, 1, 1, 0, 0, 20, tzinfo=UTC)]
    assert s.next_run("past") is None
    clock.advance(5)
    assert s.next_run("e") == datetime(2026, 1, 1, 0, 0, 20, tzinfo=UTC)


def test_next_run_with_the_system_clock_is_in_the_future(scheduler: anarchon.Scheduler) -> None:
    scheduler.every("e", "1h", handler)
    nxt = scheduler.next_run("e")
    assert nxt is not None and nxt.tzinfo is UTC
    now = datetime.now(UTC)
    assert now - timedelta(seconds=5) < nxt <= now + timedelta(hours=1, seconds=5)


def test_next_runs_after_with_sub_millisecond_precision(scheduler: anarchon.Scheduler) -> None:
    scheduler.every("e", "10s", handler)
    after = datetime(2026, 1, 1, 0, 0, 9, 999_600, tzinfo=UTC)
    assert scheduler.next_runs("e", 1, after=after) == [datetime(2026, 1, 1, 0, 0, 10,
                                                                 tzinfo=UTC)]


# -- claim-only backends refuse lease-only options ----------------------------------------------

@pytest.mark.parametrize(
    ("option", "value"),
    [("lease", "30s"), ("heartbeat", "5s"), ("overlap", "allow"), ("max_attempts", 3),
     ("catch_up", "5m")],
)
def test_claim_only_refuses_lease_options_on_scheduler(option: str, value: Any) -> None:
    with pytest.raises(TypeError) as info:
        anarchon.Scheduler(backend=MemoryClaimBackend(), **{option: value})
    assert repr(option) in str(info.value)
    assert "memory:claim" in str(info.value)


@pytest.mark.parametrize(
    ("kind", "when", "option", "value"),
    [
        ("every", "10s", "overlap", "allow"),
        ("every", "10s", "overlap", "skip"),  # even the default value: never silently ignored
        ("every", "10s", "max_attempts", 1),
        ("every", "10s", "catch_up", 0),
        ("cron", "0 * * * *", "overlap", "skip"),
        ("cron", "0 * * * *", "max_attempts", 5),
        ("cron", "0 * * * *", "catch_up", "5m"),
        ("at", "2030-01-01T00:00:00Z", "max_attempts", 2),
        ("at", "2030-01-01T00:00:00Z", "catch_up", "1m"),
    ],
)
@pytest.mark.parametrize("form", ["chained", "decorator"])
def test_claim_only_refuses_lease_options_on_jobs(kind: str, when: Any, option: str,
                                                  value: Any, form: str) -> None:
    s = anarchon.Scheduler(backend=MemoryClaimBackend())
    with pytest.raises(TypeError) as info:
        _add(s, kind, form, when, {option: value})
    message = str(info.value)
    assert repr(option) in message
    assert "memory:claim" in message
    assert "'my-job'" in message
    assert s.job_names == []


def test_claim_only_refuses_history_ttl_when_unsupported() -> None:
    with pytest.raises(TypeError, match="history_ttl") as info:
        anarchon.Scheduler(backend=MemoryClaimBackend(), history_ttl="1d")
    assert "memory:claim" in str(info.value)
    s = anarchon.Scheduler(backend=MemoryClaimBackend())
    with pytest.raises(TypeError, match="history_ttl"):
        s.every("my-job", "10s", handler, history_ttl="1d")


def test_claim_only_accepts_common_options() -> None:
    backend = MemoryClaimBackend()
    s = anarchon.Scheduler(backend=backend, jitter="1s", max_late="30s", timeout="1m",
                           history_size=10, timezone="Europe/Berlin", data={"k": 1})
    s.every("a", "10s", handler, jitter=0, max_late=5, timeout="5s", offset="1s",
            history_size=3, data={"x": 1})
    s.cron("b", "0 * * * *", handler, timezone="UTC")
    s.at("c", "2030-01-01T00:00:00Z", handler)
    assert s.job_names == ["a", "b", "c"]
    assert not backend.opened
