"""``anarchon_celery.Scheduler``: a Celery beat scheduler for running beat on every node.

Every beat computes the same slots; at each slot the beats claim it in anarchon's store
and only the winner publishes. The engine runs in its own thread; beat's ``tick()`` only
tells beat how long to sleep and never touches the store.
"""

from __future__ import annotations

import logging
import time
from datetime import datetime
from typing import Any

from celery import beat

from anarchon import Scheduler as CoreScheduler
from anarchon import parse_duration
from anarchon.backends.base import JobSpec, LeaseBackend
from anarchon.backends.capabilities import ControlStore, ValueStore
from anarchon.errors import JobNotFoundError
from anarchon.observability import port_from, serve_metrics
from anarchon_celery.beat.config import FRAMEWORK, Settings, resolve
from anarchon_celery.beat.drift import DriftWatch
from anarchon_celery.beat.runbook import RunBook
from anarchon_celery.beat.shared import SharedRunner
from anarchon_celery.entries.dynamic import HANDLER, EntryPublisher
from anarchon_celery.schedules.convert import JobPlan, app_timezone, convert_entry
from anarchon_celery.tasks.outcomes import OutcomeWatch
from anarchon_celery.tasks.publish import BeatCall, Publisher

logger = logging.getLogger("anarchon.celery")
#: up to this many entries, each one's schedule and next run is logged at start
_DESCRIBED = 20
#: the live beats compare their entries' definitions every this many heartbeats
_DRIFT_HEARTBEATS = 10


class Scheduler(beat.Scheduler):
    """Run ``celery beat -S anarchon_celery:Scheduler`` on every node.

    Entries become anarchon jobs: numbers and ``timedelta`` run ``every`` interval on the
    UTC epoch grid (stock beat counts from process start instead), ``crontab`` entries
    follow Celery's own crontab results in their zone, ``solar`` entries Celery's solar
    code. Only the slot winner publishes, with ``anarchon_job``/``anarchon_slot``/
    ``anarchon_attempt`` headers. Schedules that decide by their own ``is_due`` run on a
    shared ``last_run_at`` (see the Celery page). An entry that cannot be
    scheduled is logged at ERROR and kept in ``refused``; the others run.

    On a store with runtime control every beat also offers the ``celery:publish``
    handler, so it runs the entries saved at run time with
    [`Entry`][anarchon_celery.Entry] (changes reach it within one heartbeat).

    Entries default to ``overlap="allow"`` unless outcomes are tracked (then the core's
    ``"skip"``: no slot is published while the previous task is queued or running); an
    ``overlap`` in ``anarchon_scheduler`` or in the entry's ``options["anarchon"]`` wins.

    The core scheduler is the public attribute `anarchon` (built on first access,
    without I/O). Building with ``lazy=True`` (beat's banner) has no side effects.
    """

    def __init__(self, app: Any, lazy: bool = False, **kwargs: Any) -> None:
        self._core: CoreScheduler | None = None
        self._settings: Settings | None = None
        self._entries_loaded = False
        self._started = False
        self._closed = False
        self._next_due: float | None = None
        #: entries that do not run, by name: why (logged at ERROR once per start)
        self.refused: dict[str, str] = {}
        self._runbook: RunBook | None = None
        self._watch: OutcomeWatch | None = None
        self._shared: SharedRunner | None = None
        self._drift: DriftWatch | None = None
        self._kinds: dict[str, str] = {}
        self._described: dict[str, str] = {}
        super().__init__(app, lazy=lazy, **kwargs)

    # -- configuration (pure) ---------------------------------------------------------------

    @property
    def settings(self) -> Settings:
        """anarchon settings read from the app's config (no I/O)."""
        if self._settings is None:
            self._settings = resolve(self.app)
        return self._settings

    def _load_entries(self) -> None:
        if self._entries_loaded:
            return
        # beat_schedule first, then the default entries: the base order would drop
        # celery.backend_cleanup again (merge_inplace removes unknown names).
        self.merge_inplace(self.app.conf.beat_schedule or {})
        self.install_default_entries(self.schedule)
        self._entries_loaded = True

    def plans(self) -> list[JobPlan]:
        """The jobs the entries become. An entry that cannot be converted is left out and
        kept in ``refused`` with the reason; a setting that concerns every entry (the
        app's timezone) raises
        [`ConfigurationError`][anarchon_celery.ConfigurationError]."""
        self._load_entries()
        tz = app_timezone(self.app)
        zone = self.settings.scheduler_options.get("timezone")
        self.refused = {}
        plans = []
        for name, entry in sorted(self.schedule.items()):
            try:
                plans.append(convert_entry(name, entry, tz, zone))
            except Exception as exc:  # whatever the schedule object raises: refuse it
                self.refused[name] = str(exc)
        return plans

    @property
    def anarchon(self) -> CoreScheduler:
        """The core scheduler this beat drives (jobs registered, not started)."""
        if self._core is None:
            self._core = self._build()
        return self._core

    def _build(self) -> CoreScheduler:
        settings = self.settings
        options = dict(settings.scheduler_options)
        core = CoreScheduler(settings.build_backend(), metrics=settings.metrics, **options)
        core.on("skip", _log_skip)
        self._runbook = RunBook(self.schedule, app_timezone(self.app))
        self._watch = OutcomeWatch(core.core)
        core.on("start", self._runbook.on_event)
        core.on("skip", self._runbook.on_event)
        default_max_late = parse_duration(options.get("max_late", 60), option="max_late")
        # a tracked manual run (Run now) waits for its task's outcome in a shared value
        values = core if isinstance(core.backend, ValueStore) else None
        if isinstance(core.backend, ControlStore):
            # any beat runs any dynamic entry (anarchon_celery.Entry): the task is in params
            watch = (self._watch if settings.track and not settings.resend
                     and isinstance(core.backend, LeaseBackend) else None)
            core.handler(HANDLER, EntryPublisher(
                self.app, core.core, track=settings.track,
                queue_lease=settings.queue_lease, max_late=default_max_late, watch=watch,
                values=values, beat=self))
        for plan in self.plans():
            if plan.kind == "shared":
                self._add_shared(core, plan)
                continue
            track = bool(plan.extra.get("track", settings.track))
            queue_lease = float(plan.extra.get("queue_lease", settings.queue_lease))
            resend = bool(plan.extra.get("resend", settings.resend))
            max_late = parse_duration(plan.options.get("max_late", default_max_late),
                                      option=f"beat entry {plan.name!r}: max_late")
            publisher = Publisher(self.app, self.schedule[plan.name], plan.publish_options,
                                  track=track, queue_lease=queue_lease, max_late=max_late,
                                  engine=core.core, lease=core.core.options.lease,
                                  heartbeat=core.core.options.heartbeat, values=values,
                                  beat=self)
            job_options = dict(plan.options)
            if track and not resend and isinstance(core.backend, LeaseBackend):
                # attempt 2 would be a second copy of a task that may only be waiting in
                # the queue: the run ends interrupted instead (and the watch says why)
                job_options["max_attempts"] = 1
                publisher.watch = self._watch
            if (not track and "overlap" not in job_options and "overlap" not in options
                    and isinstance(core.backend, LeaseBackend)):
                # the run is only the publish: "skip" would drop a slot whenever the
                # previous publish is still retrying (broker down) or its finish is not
                # written yet (under a burst and CPU load: seconds after the publish)
                job_options["overlap"] = "allow"
            self._described[plan.name] = (plan.schedule.describe() if plan.schedule
                                          else f"every {plan.when:g}s")
            self._kinds[plan.name] = plan.kind
            try:
                if plan.schedule is not None:
                    core.declare_job(plan.schedule.kind, plan.name, plan.schedule, publisher,
                                     job_options, framework=FRAMEWORK)
                else:
                    core.declare_job(plan.kind, plan.name, plan.when, publisher, job_options,
                                     framework=FRAMEWORK)
            except (TypeError, ValueError) as exc:  # an option the core refuses
                self.refused[plan.name] = str(exc)
        for name, reason in sorted(self.refused.items()):
            entry = self.schedule[name]
            logger.error("beat entry %r (task %s, schedule %s) refused, it does not run: %s; "
                         "the other entries run", name, entry.task, _shown(entry.schedule),
                         reason)
        return core

    def _add_shared(self, core: CoreScheduler, plan: JobPlan) -> None:
        if not isinstance(core.backend, ValueStore):
            self.refused[plan.name] = (
                f"its {type(plan.when).__name__} schedule runs on a shared last_run_at, "
                f"which backend {core.backend.name} cannot keep (use Redis, Valkey, "
                "PostgreSQL or SQLite)")
            return
        if self._shared is None:
            self._shared = SharedRunner(self.app, core, core.instance_id,
                                        app_timezone(self.app),
                                        float(self.max_interval or 300),
                                        apply_entry=self.apply_entry)
        self._shared.add(plan.name, self.schedule[plan.name], plan.publish_options)
        self._described[plan.name] = (f"{_shown(plan.when)}: its own is_due on the shared "
                                      "last_run_at")
        self._kinds[plan.name] = "shared"

    # -- beat's interface -------------------------------------------------------------------

    def setup_schedule(self) -> None:
        """Load entries, build the core scheduler and start it (not called when lazy)."""
        core = self.anarchon
        serve_metrics_of(self.settings)  # /metrics (docs/operations.md, Metrics)
        core.start(wait=True)  # beat runs for ever: outlast a store that is down at start
        self._started = True
        shared = sorted(self._shared.entries) if self._shared is not None else []
        core.announce([JobSpec(name, "refused", f"refused: {reason}", FRAMEWORK)
                       for name, reason in sorted(self.refused.items())]
                      + [JobSpec(name, "shared", self._described[name], FRAMEWORK)
                         for name in shared])
        if self._shared is not None:
            self._shared.start()
        # the beat_schedule entries this beat declared; after start() the core also
        # holds the entries saved at run time (celery:publish jobs), which are not in
        # beat's schedule: the store keeps one definition of those, nothing drifts
        code = self.code_jobs()
        if isinstance(core.backend, ValueStore):
            period = min(max(_DRIFT_HEARTBEATS * core.core.options.heartbeat, 2.0), 60.0)
            self._drift = DriftWatch(core, core.instance_id,
                                     {name: self.schedule[name] for name in [*code, *shared]},
                                     self._described, core.announce, self._kinds, period)
            self._drift.start()
        if self._runbook is not None:
            self._runbook.load(core.history, code)
        runtime = [name for name in core.job_names if name not in self._kinds]
        count = len(code) + len(shared)
        describe = logger.info if count + len(runtime) <= _DESCRIBED else logger.debug
        for name in code:
            describe("anarchon_celery: entry %r: %s; next run %s", name,
                     self._described.get(name, "?"), _iso(self._next_run(name)))
        for name in shared:
            describe("anarchon_celery: entry %r: %s", name, self._described[name])
        for name in runtime:
            describe("anarchon_celery: stored entry %r: next run %s", name,
                     _iso(self._next_run(name)))
        logger.info("anarchon_celery: %d entr%s on %s (and %d stored entr%s); instance %s",
                    count, "y" if count == 1 else "ies", core.backend.name, len(runtime),
                    "y" if len(runtime) == 1 else "ies", core.instance_id)

    def code_jobs(self) -> list[str]:
        """The ``beat_schedule`` entries this beat runs as core jobs (not the shared ones,
        not the refused ones, not the entries stored at run time)."""
        if self._core is None:
            return []
        return [name for name in self._core.job_names
                if self._kinds.get(name) not in (None, "shared") and name in self.schedule]

    def _next_run(self, name: str) -> datetime | None:
        """The next slot of job ``name``; ``None`` when it is gone (a stored entry deleted
        meanwhile: the engine's thread adds and removes those at any moment)."""
        if self._core is None:
            return None
        try:
            return self._core.next_run(name)
        except JobNotFoundError:
            return None

    def tick(self, *args: Any, **kwargs: Any) -> float:
        """Seconds until the next slot (at most ``max_interval``); never touches the store."""
        max_interval = float(self.max_interval or 300)
        if self._core is None or self._closed:
            return max_interval
        now = time.time()
        if self._next_due is None or self._next_due <= now:
            upcoming = [run.timestamp() for name in self._core.job_names
                        if (run := self._next_run(name)) is not None]
            self._next_due = min(upcoming) if upcoming else now + max_interval
        return max(min(self._next_due - now, max_interval), 0.001)

    def apply_async(self, entry: Any, producer: Any = None, advance: bool = True,
                    **kwargs: Any) -> Any:
        """Publish: beat's ``apply_entry`` (which logs "Sending due task" and which hooks
        such as Sentry Crons wrap) calls this for each slot this beat won."""
        if isinstance(entry, BeatCall):  # a slot's publish, or a shared entry's
            return entry.run()
        return super().apply_async(entry, producer, advance, **kwargs)

    def sync(self) -> None:
        """Nothing to persist: the store holds the state."""

    def close(self) -> None:
        """Stop gracefully, handing running slots over to another beat. Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            if self._drift is not None:
                self._drift.stop()
            if self._shared is not None:
                self._shared.stop()
            if self._core is not None and self._started:
                self._core.stop(self.settings.stop_timeout)
            if self._watch is not None:
                self._watch.close()
        finally:
            super().close()

    @property
    def info(self) -> str:
        """The beat banner's line (no side effects)."""
        try:
            where = self.settings.describe()
        except Exception as exc:
            where = f"not configured: {exc}"
        return f"    . anarchon -> {where}"


def _shown(value: Any) -> str:
    """``repr(value)``, even for a schedule object too broken to show itself."""
    try:
        return repr(value)
    except Exception:
        return f"<{type(value).__name__} object>"


def _iso(value: datetime | None) -> str:
    return value.isoformat() if value is not None else "never"


def _log_skip(event: Any) -> None:
    """Make skipped slots visible in the beat log (``taken`` is the normal case)."""
    if event.reason in ("taken", "paused"):
        return  # taken: another beat publishes it; paused: on purpose (every slot)
    why = {"overlap": "the previous slot's run still holds its lease (its task queued or "
                      "running, its publish retrying, or its finish not yet recorded)",
           "late": "claimed later than max_late"}.get(event.reason, event.reason)
    logger.warning("beat entry %r slot %s skipped (%s): %s", event.name, event.slot,
                   event.reason, why)

def serve_metrics_of(settings: Settings) -> None:
    """Serve ``/metrics`` on ``anarchon_metrics_port`` (else ``ANARCHON_METRICS_PORT``)
    when ``anarchon_metrics`` is on; a port without it is said once, at WARNING."""
    port = settings.metrics_port if settings.metrics_port is not None else port_from(None)
    if port is None:
        return
    if not settings.metrics:
        logger.warning("a metrics port (%d) is set but anarchon_metrics is not True: "
                       "/metrics is not served", port)
        return
    serve_metrics(port)


__all__ = ["Scheduler"]
