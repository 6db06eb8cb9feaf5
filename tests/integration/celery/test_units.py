"""Pure tests: crontab parity with Celery, entry conversion, beat API gotchas."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from celery import Celery
from celery import __version__ as celery_version
from celery.schedules import BaseSchedule, crontab, schedule, solar

from anarchon.schedules.kinds import datetime_to_ms, ms_to_datetime
from anarchon_celery import CeleryCrontabSchedule, ConfigurationError, Scheduler
from anarchon_celery.schedules.crontab import celery_next_run, crontab_expression

NEW_YORK = ZoneInfo("America/New_York")
START = datetime(2025, 1, 1, tzinfo=timezone.utc)
END = START + timedelta(days=730)
#: DST changes in New York during the two years (local dates)
DST_DAYS = [datetime(2025, 3, 9), datetime(2025, 11, 2), datetime(2026, 3, 8),
            datetime(2026, 11, 1)]

CORPUS: list[tuple[str, dict[str, Any]]] = [
    ("every minute", {}),
    ("quarter hours", {"minute": "*/15"}),
    ("hourly", {"minute": 0}),
    ("every 3 hours", {"minute": 0, "hour": "*/3"}),
    ("02:30 daily (gap)", {"minute": 30, "hour": 2}),
    ("01:30 daily (repeat)", {"minute": 30, "hour": 1}),
    ("list and range", {"minute": "5,35", "hour": "1-3"}),
    ("python lists", {"minute": [0, 30], "hour": [1, 2, 3]}),
    ("weekdays by name", {"minute": 15, "hour": 9, "day_of_week": "mon-fri"}),
    ("first monday (AND)", {"minute": 0, "hour": 0, "day_of_month": "1-7",
                            "day_of_week": "mon"}),
    ("friday the 13th", {"minute": 0, "hour": 12, "day_of_month": 13, "day_of_week": 5}),
    ("quarterly", {"minute": 0, "hour": 4, "day_of_month": 1, "month_of_year": "*/3"}),
    ("31st only", {"minute": 59, "hour": 23, "day_of_month": 31}),
    ("sunday 02:00", {"minute": 0, "hour": 2, "day_of_week": "sun"}),
    ("stepped range", {"minute": "10-50/20", "hour": "0-23/5", "day_of_week": "sat,sun"}),
    ("leap day", {"minute": 0, "hour": 0, "day_of_month": 29, "month_of_year": 2}),
]


@pytest.fixture(scope="module")
def app() -> Celery:
    app = Celery("parity", set_as_current=False)
    app.conf.update(timezone="America/New_York")
    return app


#: Celery before 5.7 gives a frequent crontab's next run after a past ``last_run_at`` an
#: hour late (its maths mixes in the real "now"); anarchon's slots never come from
#: Celery's maths, so with an older Celery (the floors run in scripts/floors.sh uses
#: 5.3) frequent crontabs are not compared with it
CELERY_PARITY = tuple(int(p) for p in celery_version.split(".")[:2]) >= (5, 7)


def windows(frequent: bool) -> Iterator[tuple[datetime, datetime]]:
    """The whole two years, or (for frequent crontabs) the DST days and a quiet day."""
    if not frequent:
        yield START, END
        return
    for day in [*DST_DAYS, datetime(2025, 6, 15)]:
        local = day.replace(tzinfo=NEW_YORK)
        yield local - timedelta(hours=2), local + timedelta(hours=6)


def _frequent(fields: dict[str, Any]) -> bool:
    cron = crontab(**fields)
    return len(cron.minute) * len(cron.hour) > 4  # type: ignore[attr-defined]


#: the crontabs compared with Celery's own maths (not collected rather than skipped: CI
#: fails a skipped test)
COMPARED = [c for c in CORPUS if CELERY_PARITY or not _frequent(c[1])]


@pytest.mark.parametrize(("label", "fields"), COMPARED, ids=[c[0] for c in COMPARED])
def test_slots_equal_celerys_own_crontab(app: Celery, label: str, fields: dict[str, Any]
                                         ) -> None:
    cron = crontab(app=app, **fields)
    ours = CeleryCrontabSchedule.from_crontab(cron, NEW_YORK)
    frequent = _frequent(fields)
    compared = 0
    for begin, end in windows(frequent):
        after, theirs_after = datetime_to_ms(begin), begin
        while True:
            mine = ours.next_after(after)
            # beat runs a moment after the slot: that is its next last_run_at
            theirs = celery_next_run(cron, theirs_after + timedelta(milliseconds=5))
            assert mine is not None
            assert ms_to_datetime(mine) == theirs, (
                f"{label}: after {ms_to_datetime(after).astimezone(NEW_YORK)} anarchon says "
                f"{ms_to_datetime(mine).astimezone(NEW_YORK)}, Celery "
                f"{theirs.astimezone(NEW_YORK)}")
            if theirs > end:
                break
            after, theirs_after = mine, theirs
            compared += 1
    assert compared > 0 or label == "leap day"


def test_dst_days_follow_celery(app: Celery) -> None:
    """Gap: 02:30 fires at 03:30. Repeat: the second occurrence is skipped, even hourly."""
    gap = CeleryCrontabSchedule.from_crontab(crontab(minute=30, hour=2, app=app), NEW_YORK)
    spring = datetime(2025, 3, 9, tzinfo=NEW_YORK)
    slot = gap.next_after(datetime_to_ms(spring))
    assert slot is not None
    assert ms_to_datetime(slot).astimezone(NEW_YORK).hour == 3
    hourly = CeleryCrontabSchedule.from_crontab(crontab(minute=0, app=app), NEW_YORK)
    fall = datetime(2025, 11, 2, 0, 30, tzinfo=NEW_YORK)
    slots, after = [], datetime_to_ms(fall)
    for _ in range(3):
        nxt = hourly.next_after(after)
        assert nxt is not None
        slots.append(ms_to_datetime(nxt))
        after = nxt
    # 01:00 EDT, then 02:00 EST: 01:00 EST (the repeat) is skipped, like Celery
    assert [s - slots[0] for s in slots] == [timedelta(0), timedelta(hours=2),
                                            timedelta(hours=3)]


def test_started_inside_repeated_hour_never_runs_it_twice(app: Celery) -> None:
    quarter = CeleryCrontabSchedule.from_crontab(crontab(minute="*/15", app=app), NEW_YORK)
    inside = datetime(2025, 11, 2, 1, 10, tzinfo=NEW_YORK, fold=1)  # 01:10 EST
    slot = quarter.next_after(datetime_to_ms(inside))
    assert slot is not None
    assert ms_to_datetime(slot).astimezone(NEW_YORK) == datetime(2025, 11, 2, 2, 0,
                                                                  tzinfo=NEW_YORK)


def test_expression_uses_fields_not_repr() -> None:
    cron = crontab(minute="0", hour="4", day_of_week="mon-fri", day_of_month="1-7")
    assert crontab_expression(cron) == "0 4 1,2,3,4,5,6,7 * 1,2,3,4,5"


def make_app(**conf: Any) -> Celery:
    app = Celery("units", set_as_current=False, broker=conf.pop("broker", "redis://h:1/3"))
    app.conf.update({"timezone": "America/New_York", **conf})
    return app


def test_next_runs_of_the_beat_scheduler_follow_celery() -> None:
    app = make_app(anarchon_backend="sqlite:///unused.db",
                   beat_schedule={"digest": {"task": "t", "schedule": crontab(minute=0)},
                                  "tick": {"task": "t", "schedule": 10.0}})
    beat = Scheduler(app, lazy=True)
    after = datetime(2025, 11, 2, 0, 30, tzinfo=NEW_YORK)
    runs = beat.anarchon.next_runs("digest", 3, after=after)
    cron = crontab(minute=0, app=app)
    expected, last = [], after
    for _ in range(3):
        last = celery_next_run(cron, last)
        expected.append(last)
    assert runs == expected
    ticks = beat.anarchon.next_runs("tick", 2, after=datetime(2025, 1, 1, 0, 0, 3,
                                                              tzinfo=timezone.utc))
    assert [t.second for t in ticks] == [10, 20]  # the UTC grid, not process start
    assert "celery.backend_cleanup" in beat.anarchon.job_names
    # every entry's job is marked as Celery's, crontab (a Schedule) and interval alike
    assert {job.name: job.framework for job in beat.anarchon.core.runtime.jobs.values()} == {
        "digest": "celery", "tick": "celery", "celery.backend_cleanup": "celery"}


def test_lazy_build_has_no_side_effects(tmp_path: Any) -> None:
    database = tmp_path / "beat.db"
    app = make_app(anarchon_backend=f"sqlite:///{database}",
                   beat_schedule={"tick": {"task": "t", "schedule": 1.0}})
    beat = Scheduler(app, lazy=True)
    assert "sqlite" in beat.info
    assert beat.tick() <= 300
    beat.close()
    beat.close()
    assert not database.exists()


def test_default_backend_is_the_brokers_redis() -> None:
    app = make_app(broker="redis://:secret@redis.example:6380/2?ssl_cert_reqs=none")
    beat = Scheduler(app, lazy=True)
    assert beat.settings.backend == "redis://:secret@redis.example:6380/2?ssl_cert_reqs=none"
    assert beat.settings.backend_options == {"prefix": "anarchon:"}
    assert "secret" not in beat.info
    assert "broker" in beat.info


def test_no_store_and_no_redis_broker_is_a_clear_error() -> None:
    app = make_app(broker="amqp://guest@localhost//")
    beat = Scheduler(app, lazy=True)
    assert "not configured" in beat.info
    with pytest.raises(ConfigurationError, match="anarchon_backend"):
        _ = beat.anarchon


def test_broker_tls_and_transport_settings_reach_the_store() -> None:
    import ssl

    app = make_app(broker="redis://cache.example:6379/1?ssl_cert_reqs=CERT_NONE&x=1",
                   broker_use_ssl={"ssl_cert_reqs": ssl.CERT_REQUIRED,
                                   "ssl_ca_certs": "/etc/ca.pem"},
                   broker_transport_options={"socket_timeout": 4, "visibility_timeout": 9,
                                             "retry_on_timeout": True})
    url = Scheduler(app, lazy=True).settings.backend
    # the URL's own query wins; broker_use_ssl turns TLS on as kombu does
    assert url == ("rediss://cache.example:6379/1?ssl_cert_reqs=none&ssl_ca_certs=%2Fetc"
                   "%2Fca.pem&socket_timeout=4&retry_on_timeout=true")


def test_a_sentinel_broker_needs_its_own_store_url() -> None:
    app = make_app(broker="sentinel://s1:26379;sentinel://s2:26379",
                   broker_transport_options={"master_name": "main"})
    with pytest.raises(ConfigurationError, match=r"Sentinel.*anarchon_backend"):
        _ = Scheduler(app, lazy=True).settings


def test_a_node_local_timezone_is_refused() -> None:
    app = make_app(anarchon_backend="sqlite:///unused.db", enable_utc=False, timezone=None,
                   beat_schedule={"t": {"task": "t", "schedule": crontab(hour=9, minute=0)}})
    with pytest.raises(ConfigurationError, match="enable_utc=False and no timezone"):
        _ = Scheduler(app, lazy=True).anarchon


def test_crontab_zone_entry_then_scheduler_then_app() -> None:
    nine = crontab(hour=9, minute=0)
    app = make_app(anarchon_backend="sqlite:///unused.db", timezone="Europe/Berlin",
                   anarchon_scheduler={"timezone": "Asia/Tokyo"}, beat_schedule={
                       "tokyo": {"task": "t", "schedule": nine},
                       "ny": {"task": "t", "schedule": nine,
                              "options": {"anarchon": {"timezone": "America/New_York"}}}})
    plans = {p.name: p for p in Scheduler(app, lazy=True).plans()}
    assert plans["tokyo"].options["timezone"] == "Asia/Tokyo"
    assert plans["ny"].options["timezone"] == "America/New_York"
    assert plans["celery.backend_cleanup"].options["timezone"] == "Asia/Tokyo"


class NoEphemSolar(solar):
    """A solar schedule whose fields are missing: converting it fails."""

    def __init__(self) -> None:
        BaseSchedule.__init__(self)


class Wobbly(schedule):
    """A custom schedule class."""

    def is_due(self, last_run_at: datetime) -> Any:
        return super().is_due(last_run_at)


@pytest.mark.parametrize(("entry_schedule", "backend", "message"), [
    (NoEphemSolar(), "sqlite:///unused.db", "event"),
    (Wobbly(timedelta(seconds=5)), "redis://h:1/0?strategy=stream-id&lab=1", "shared last_run_at"),
])
def test_an_entry_that_cannot_run_is_refused_by_name_and_the_others_run(
        entry_schedule: Any, backend: str, message: str) -> None:
    app = make_app(anarchon_backend=backend,
                   beat_schedule={"odd-entry": {"task": "t", "schedule": entry_schedule},
                                  "fine": {"task": "t", "schedule": 5.0}})
    beat = Scheduler(app, lazy=True)
    assert "fine" in beat.anarchon.job_names
    assert "odd-entry" not in beat.anarchon.job_names
    assert message in beat.refused["odd-entry"]


class PlainCrontab(crontab):
    """A crontab subclass that changes nothing about timing."""


class EstimatedCrontab(crontab):
    def remaining_estimate(self, last_run_at: datetime, ffwd: Any = None) -> timedelta:
        return timedelta(seconds=5)


def test_which_path_each_schedule_type_takes() -> None:
    from anarchon_celery.schedules.convert import path_of

    assert path_of(schedule(timedelta(seconds=5))) == "every"
    assert path_of(schedule(timedelta(seconds=5), relative=True)) == "shared"
    assert path_of(schedule(timedelta(seconds=5)), relative=True) == "shared"
    assert path_of(crontab(minute=0)) == "cron"
    assert path_of(PlainCrontab(minute=0)) == "cron"
    assert path_of(EstimatedCrontab(minute=0)) == "shared"
    assert path_of(solar("sunrise", 1.0, 2.0)) == "solar"
    assert path_of(Wobbly(timedelta(seconds=5))) == "shared"
    app = make_app(anarchon_backend="sqlite:///unused.db",
                   beat_schedule={"odd": {"task": "t", "schedule": Wobbly(5.0)}})
    beat = Scheduler(app, lazy=True)
    assert "odd" not in beat.anarchon.job_names and not beat.refused
    plan = next(p for p in beat.plans() if p.name == "odd")
    assert plan.kind == "shared"


def test_solar_slots_are_celerys_events_rounded_to_the_second() -> None:
    from anarchon_celery.schedules.solar import CelerySolarSchedule

    for event in ("sunrise", "sunset", "dawn_civil", "solar_noon"):
        celery_solar = solar(event, 52.52, 13.40)
        ours = CelerySolarSchedule.from_solar(celery_solar)
        after = START
        for _ in range(20):
            slot = ours.next_after(datetime_to_ms(after))
            assert slot is not None
            pinned = solar(event, 52.52, 13.40, nowfun=lambda now=after: now)
            expected = after + pinned.remaining_estimate(after)
            # ephem's own answer moves by tenths of a second with its search start
            assert abs(slot / 1000 - expected.timestamp()) <= 1.0
            # from any instant before the event, the same slot (beats agree)
            for before in (1_000, 60_000, 3_600_000, 5 * 3_600_000):
                assert ours.next_after(slot - before) == slot, (event, slot, before)
            # a second after the slot, rounding may still be before the exact event
            after = ms_to_datetime(slot + 1000)


def test_per_entry_anarchon_options() -> None:
    app = make_app(anarchon_backend="sqlite:///unused.db", beat_schedule={
        "pay": {"task": "t", "schedule": 60.0,
                "options": {"queue": "q", "anarchon": {"max_attempts": 1, "catch_up": 0,
                                                       "queue_lease": "2m"}}}})
    beat = Scheduler(app, lazy=True)
    plan = next(p for p in beat.plans() if p.name == "pay")
    assert dict(plan.options) == {"max_attempts": 1, "catch_up": 0}
    assert plan.extra == {"queue_lease": 120.0}
    assert dict(plan.publish_options) == {"queue": "q"}
    assert beat.anarchon.job_names


def test_overlap_defaults_to_allow_unless_outcomes_are_tracked() -> None:
    """An untracked run is only the publish: "skip" would drop a slot whenever the
    previous publish is retrying or its finish is still queued (the 1,000-entry test
    under load); with tracking "skip" means "previous task still queued or running"."""
    schedule = {"plain": {"task": "t", "schedule": 5.0},
                "mine": {"task": "t", "schedule": 5.0,
                         "options": {"anarchon": {"overlap": "skip"}}},
                "tracked": {"task": "t", "schedule": 5.0,
                            "options": {"anarchon": {"track_outcomes": True}}}}

    def overlaps(**conf: Any) -> dict[str, str]:
        core = Scheduler(make_app(anarchon_backend="sqlite:///unused.db",
                                  beat_schedule=schedule, **conf), lazy=True).anarchon.core
        return {name: core.runtime.jobs[name].overlap for name in schedule}

    assert overlaps() == {"plain": "allow", "mine": "skip", "tracked": "skip"}
    assert overlaps(anarchon_track_outcomes=True) == {
        "plain": "skip", "mine": "skip", "tracked": "skip"}
    assert overlaps(anarchon_scheduler={"overlap": "skip"}) == {
        "plain": "skip", "mine": "skip", "tracked": "skip"}


# -- the lease fence before a publish ---------------------------------------------------------

def _fenced_ctx(attempt: int = 1) -> Any:
    from anarchon import AbortSignal, RunContext

    return RunContext("tick", 1_000, ms_to_datetime(1_000), "me", False, attempt,
                      "scheduled", AbortSignal(), None)


def _engine(renewed_ago: float, attempt: int = 1, lease: float = 2.0) -> Any:
    """A stand-in for the core's ``AsyncScheduler.lease_remaining`` (tested in
    tests/unit/test_lease_remaining.py): holds attempt ``attempt`` of tick@1000."""
    import time as _time
    from types import SimpleNamespace

    renewed_at = _time.monotonic() - renewed_ago

    def lease_remaining(name: str, slot: int, attempt_: int | None = None) -> float | None:
        if (name, slot) != ("tick", 1_000) or attempt_ not in (None, attempt):
            return 0.0
        return renewed_at + lease - _time.monotonic()

    return SimpleNamespace(lease_remaining=lease_remaining)


def test_fence_passes_a_fresh_lease_and_a_claim_only_store() -> None:
    from types import SimpleNamespace

    from anarchon.handoff.fence import ensure_lease

    ctx = _fenced_ctx()
    ensure_lease(_engine(0.5), ctx, margin=1.0, wait=0.0)  # 1.5 s lease, 1 s left: fine
    claim_only: Any = SimpleNamespace(lease_remaining=lambda *_: None)
    ensure_lease(claim_only, ctx, margin=1.0, wait=0.0)  # no lease: no fence
    from anarchon import Aborted
    with pytest.raises(Aborted):  # another attempt holds the slot
        ensure_lease(_engine(0.1, attempt=2), ctx, margin=0.3, wait=0.05)


def test_fence_refuses_a_stale_lease_and_an_aborted_run() -> None:
    from anarchon import Aborted
    from anarchon.handoff.fence import ensure_lease

    ctx = _fenced_ctx()
    ensure_lease(_engine(0.1), ctx, margin=0.3, wait=1.0)  # fresh: returns at once
    with pytest.raises(Aborted):  # stale and never renewed: not confirmed
        ensure_lease(_engine(5.0), ctx, margin=0.3, wait=0.1)
    ctx.signal.abort("lost")
    with pytest.raises(Aborted):
        ensure_lease(_engine(0.1), ctx, margin=0.3, wait=1.0)
