"""Admin pages: run history (all instances, filters, detail) and jobs (timeline, Run now).

URLs (under the admin site, e.g. ``/admin/``):

* ``anarchon_django/run/`` — history, each attempt with its job's framework (as on the
  Jobs page); GET filters ``job``, ``status``, ``reason``, ``instance``, ``date``
  (``today``, ``7d``, ``30d`` or ``YYYY-MM-DD``), search ``q``, page ``p``. Needs
  ``anarchon_django.view_run``.
* ``anarchon_django/run/detail/?job=…&slot=…&attempt=…&manual=0|1`` — one attempt with
  its error. Needs ``anarchon_django.view_run``.
* ``anarchon_django/job/`` — jobs, the framework that declared each (``celery``,
  ``dramatiq``, ``plain``), next run, last outcome, runner, timeline; GET filter
  ``framework``. Needs ``anarchon_django.view_job``.
* ``anarchon_django/job/run/`` — POST ``job``: request a manual run through the store.
  Needs ``anarchon_django.run_job``; CSRF-protected; never runs the job in the request.
* ``anarchon_django/job/detail/``, ``job/pause/``, ``job/resume/`` — the job page and
  runtime control (``anarchon_django.admin.job_pages``). Need ``anarchon_django.change_job``
  to change anything.
* ``anarchon_django/dynamicjob/`` — the dynamic jobs' admin
  (``anarchon_django.admin.dynamic_jobs``).
* ``anarchon_django/instance/`` — the instances and their liveness
  (``anarchon_django.admin.instances``). Needs ``anarchon_django.view_instance``.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlencode

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils import timezone
from django.views.decorators.http import require_POST

from anarchon import RunRecord
from anarchon.backends.frameworks import shown
from anarchon.control.registration_refresh import LIVE_WITHIN, REGISTER_EVERY
from anarchon.history import RUN_REASONS, RUN_STATUSES
from anarchon_django.admin import history as history_page
from anarchon_django.admin import job_pages, timeline
from anarchon_django.admin.dynamic_jobs import DynamicJobAdmin
from anarchon_django.admin.instances import InstanceViews
from anarchon_django.admin.query_guard import guarded
from anarchon_django.control import controls, direct, runtime
from anarchon_django.models import DynamicJob, Instance, Job, Run
from anarchon_django.store.operations import Store

STATUSES = RUN_STATUSES
REASONS = RUN_REASONS
DATES = (("today", "Today"), ("7d", "Past 7 days"), ("30d", "Past 30 days"))
PER_PAGE = 50
TIMELINE_RUNS = 30  # recent attempts per job on the timeline


class _ReadOnlyAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """No add, change or delete: the history belongs to the store."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def _context(self, request: HttpRequest, title: str, **extra: Any) -> dict[str, Any]:
        return {**self.admin_site.each_context(request), "title": title,
                "opts": self.model._meta, "app_label": self.model._meta.app_label, **extra}

    def _require_view(self, request: HttpRequest) -> None:
        if not self.has_view_permission(request):
            raise PermissionDenied


@admin.register(Run)
class RunAdmin(_ReadOnlyAdmin):
    """Run history from all instances."""

    def get_urls(self) -> list[URLPattern]:
        wrap = guarded(self.admin_site.admin_view)
        return [
            path("", wrap(self.run_history_view), name="anarchon_django_run_changelist"),
            path("detail/", wrap(self.detail_view), name="anarchon_django_run_detail"),
        ]

    def run_history_view(self, request: HttpRequest) -> HttpResponse:
        self._require_view(request)
        query = {key: request.GET.get(key, "").strip() for key in
                 ("job", "status", "reason", "instance", "date", "q")}
        since, until = _date_range(query["date"])
        query["o"] = request.GET.get("o", "").strip()
        query["p"] = request.GET.get("p", "").strip()
        try:
            store = direct.store_of(runtime.get_scheduler())
        except Exception:
            store = None  # the settings are reported by the system checks
        if store is not None:
            return self._store_history(request, store, query, since, until)
        del query["o"], query["p"]
        records: list[RunRecord] = []
        all_records: list[RunRecord] = []
        error = None
        labels: dict[str, str] = {}
        try:
            infos = runtime.job_infos()  # once per page: the names and each job's framework
            names, labels = [info.name for info in infos], history_page.frameworks(infos)
            all_records = runtime.history_all(job=query["job"] or None,
                                              search=query["q"] or None)
            records = [r for r in all_records
                       if (not query["status"] or r.status == query["status"])
                       and (not query["reason"] or r.reason == query["reason"])
                       and (not query["instance"] or r.instance_id == query["instance"])
                       and (since is None or r.started_at >= since)
                       and (until is None or r.started_at < until)]
        except Exception as exc:  # a store that does not answer: say so on the page
            names, error = [], f"{type(exc).__name__}: {exc}"
        page = Paginator(records, PER_PAGE).get_page(request.GET.get("p"))
        filters = [
            _filter("job", "By job", [(n, n) for n in names], query),
            _filter("status", "By status", [(s, s) for s in STATUSES], query),
            _filter("reason", "By reason", [(r, r) for r in REASONS], query),
            _filter("instance", "By instance",
                    [(i, i) for i in runtime.instances(all_records)], query),
            _filter("date", "By date", list(DATES), query),
        ]
        detail = reverse("admin:anarchon_django_run_detail")
        rows = [{"record": r, "url": detail + "?" + urlencode(_key(r)),
                 "framework": labels.get(r.name)} for r in page]
        return TemplateResponse(request, "admin/anarchon_django/history.html", self._context(
            request, "Run history", page=page, rows=rows, filters=filters, query=query,
            total=len(records), error=error, cl_query=_without(query, "p"),
            has_filters=any(query[k] for k in ("job", "status", "reason", "instance", "date")),
        ))

    def _store_history(self, request: HttpRequest, store: Store, query: dict[str, str],
                       since: datetime | None, until: datetime | None) -> HttpResponse:
        search = direct.HistoryQuery(query["job"] or None, query["status"] or None,
                                     query["reason"] or None, query["instance"] or None,
                                     query["q"] or None, since, until)
        error, built = None, None
        try:
            infos = runtime.job_infos()  # once per page: the names and each job's framework
            built = history_page.build(store, query, search, PER_PAGE,
                                       history_page.frameworks(infos))
            names = [info.name for info in infos]
        except Exception as exc:
            names, error = [], f"{type(exc).__name__}: {exc}"
        filters = [
            _filter("job", "By job", [(n, n) for n in names], query),
            _filter("status", "By status", [(s, s) for s in STATUSES], query),
            _filter("reason", "By reason", [(r, r) for r in REASONS], query),
            _filter("instance", "By instance",
                    [(i, i) for i in (built.instances if built else [])], query),
            _filter("date", "By date", list(DATES), query),
        ]
        return TemplateResponse(request, "admin/anarchon_django/history.html", self._context(
            request, "Run history", page=built.page if built else None,
            rows=built.rows if built else [], headers=built.headers if built else [],
            filters=filters, query=query, total=built.total if built else 0, error=error,
            cl_query=_without(query, "p"),
            has_filters=any(query[k] for k in ("job", "status", "reason", "instance", "date")),
        ))

    def detail_view(self, request: HttpRequest) -> HttpResponse:
        self._require_view(request)
        store = direct.store_of(runtime.get_scheduler())
        if store is not None and "id" in request.GET:
            found = history_page.attempt(store, request.GET["id"])
            if found is None:
                raise Http404("no such attempt in the history")
            return TemplateResponse(request, "admin/anarchon_django/detail.html",
                                    self._context(request, f"{found.name} · attempt "
                                                  f"{found.attempt}", record=found,
                                                  framework=_framework(found.name),
                                                  history_url=reverse(
                                                      "admin:anarchon_django_run_changelist")))
        try:
            name = request.GET["job"]
            slot, attempt = int(request.GET["slot"]), int(request.GET["attempt"])
            manual = request.GET.get("manual", "0") == "1"
        except (KeyError, ValueError):
            raise Http404("give job, slot and attempt") from None
        record = runtime.find_run(name, slot, attempt, manual)
        if record is None:
            raise Http404(f"no attempt {attempt} of {name!r} slot {slot} in the history")
        return TemplateResponse(request, "admin/anarchon_django/detail.html", self._context(
            request, f"{name} · attempt {attempt}", record=record,
            framework=_framework(name),
            history_url=reverse("admin:anarchon_django_run_changelist"),
        ))


@admin.register(Job)
class JobAdmin(job_pages.JobControlViews, _ReadOnlyAdmin):
    """Jobs, their next runs, who runs them, a timeline of recent runs; pause, resume
    and reschedule them."""

    def get_urls(self) -> list[URLPattern]:
        wrap = guarded(self.admin_site.admin_view)
        return [
            path("", wrap(self.jobs_view), name="anarchon_django_job_changelist"),
            path("run/", wrap(require_POST(self.run_view)), name="anarchon_django_job_run"),
            path("detail/", wrap(self.job_detail_view), name="anarchon_django_job_detail"),
            path("pause/", wrap(require_POST(self.pause_view)),
                 name="anarchon_django_job_pause"),
            path("resume/", wrap(require_POST(self.resume_view)),
                 name="anarchon_django_job_resume"),
        ]

    def jobs_view(self, request: HttpRequest) -> HttpResponse:
        self._require_view(request)
        rows: list[runtime.JobRow] = []
        gone: set[str] = set()
        chart = None
        error = None
        supported = False
        framework = request.GET.get("framework", "").strip()
        frameworks: list[str] = []
        try:
            supported = controls.supported()
            rows = runtime.job_rows()
            frameworks = sorted({shown(row.info.framework) for row in rows})
            rows = [row for row in rows if framework in ("", shown(row.info.framework))]
            recent = [record for row in rows
                      for record in runtime.history(row.info.name, TIMELINE_RUNS)]
            chart = timeline.render([row.info.name for row in rows], recent)
            gone = runtime.gone_jobs([row.info for row in rows])
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
        history = reverse("admin:anarchon_django_run_changelist")
        return TemplateResponse(request, "admin/anarchon_django/jobs.html", self._context(
            request, "Jobs", rows=[{"row": row, "gone": row.info.name in gone,
                                    "framework": shown(row.info.framework),
                                    "job_url": job_pages.job_url(row.info.name),
                                    "history_url": history + "?" + urlencode(
                {"job": row.info.name})} for row in rows], gone_after="24 hours",
            chart=chart, error=error, can_run=_can_run(request),
            framework_filter=_filter("framework", "Framework",
                                     [(f, f) for f in frameworks], {"framework": framework}),
            can_change=supported and job_pages.can_change(request), supported=supported,
            run_url=reverse("admin:anarchon_django_job_run"),
            pause_url=reverse("admin:anarchon_django_job_pause"),
            resume_url=reverse("admin:anarchon_django_job_resume"),
            here=reverse("admin:anarchon_django_job_changelist"),
        ))

    def run_view(self, request: HttpRequest) -> HttpResponse:
        if not _can_run(request):
            raise PermissionDenied
        name = request.POST.get("job", "")
        try:
            info = runtime.request_run(name)
        except (LookupError, runtime.RunRefused) as exc:
            messages.error(request, str(exc.args[0]))
        except Exception as exc:  # a store that does not answer: say so, never a 500
            messages.error(request, f"The manual run of “{name}” was not requested: "
                           f"{type(exc).__name__}: {exc}")
        else:
            paused = (f"“{name}” is paused: this manual run still runs, once (a pause "
                      "skips only its scheduled slots, until resumed). ") if info.paused else ""
            messages.success(request, f"Requested a manual run of “{name}”: {paused}"
                             f"{_who_runs(name, info.last_registered)}")
        return HttpResponseRedirect(reverse("admin:anarchon_django_job_changelist"))


def _who_runs(name: str, last: datetime | None) -> str:
    """The second half of the Run now message: whether an instance runs the job (by its
    ``last`` registration: running instances register their jobs every
    ``REGISTER_EVERY``), and the expiry."""
    ttl = getattr(runtime.get_scheduler().backend, "trigger_ttl", None)
    expiry = f" If none is running, the request expires unclaimed after {ttl:g} s." if ttl else ""
    if last is None:
        return f"an instance running {name!r} executes it within a few seconds.{expiry}"
    age = max((timezone.now() - last).total_seconds(), 0.0)
    if age <= LIVE_WITHIN:
        return (f"an instance registered {name!r} {_ago(age)} ago (running instances do so "
                f"every {REGISTER_EVERY / 60:g} min) and executes it within a few "
                f"seconds.{expiry}")
    return (f"no instance has registered {name!r} for {_ago(age)} (running instances do so "
            f"every {REGISTER_EVERY / 60:g} min), so none may be running it; it runs when "
            f"one starts.{expiry}")


def _ago(seconds: float) -> str:
    """``seconds`` as a short age: ``45 s``, ``12 min``, ``3.5 h``."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _can_run(request: HttpRequest) -> bool:
    return bool(getattr(request.user, "has_perm", lambda perm: False)("anarchon_django.run_job"))


def _framework(name: str) -> str | None:
    """What the Jobs page shows as job ``name``'s framework, from the known jobs (one
    read); ``None`` if the job is not known any more or the store does not answer."""
    try:
        return history_page.frameworks(runtime.job_infos()).get(name)
    except Exception:  # the attempt was read: show it without its framework
        return None


def _key(record: RunRecord) -> dict[str, Any]:
    return {"job": record.name, "slot": record.slot, "attempt": record.attempt,
            "manual": int(record.manual)}


def _without(query: dict[str, str], *drop: str) -> str:
    return urlencode({k: v for k, v in query.items() if v and k not in drop})


def _filter(key: str, title: str, choices: list[tuple[str, str]],
            query: dict[str, str]) -> dict[str, Any]:
    def link(value: str) -> str:
        return "?" + urlencode({k: v for k, v in {**query, key: value}.items() if v})

    items = [{"label": "All", "url": link(""), "selected": not query[key]}]
    items += [{"label": label, "url": link(value), "selected": query[key] == value}
              for value, label in choices]
    return {"key": key, "title": title, "items": items}


def _date_range(value: str) -> tuple[datetime | None, datetime | None]:
    now = timezone.now()
    midnight = timezone.localtime(now).replace(hour=0, minute=0, second=0, microsecond=0)
    if value == "today":
        return midnight, None
    if value in ("7d", "30d"):
        return now - timedelta(days=int(value[:-1])), None
    if value:
        try:  # a day the ORM can bound: 9999-12-31 has no next day (OverflowError)
            day = datetime.strptime(value, "%Y-%m-%d")
            start = timezone.make_aware(day, timezone.get_current_timezone())
            end = start + timedelta(days=1)
            start.timestamp(), end.timestamp()
        except (ValueError, OverflowError):
            return None, None
        return start, end
    return None, None


admin.site.register(DynamicJob, DynamicJobAdmin)


@admin.register(Instance)
class InstanceAdmin(InstanceViews, _ReadOnlyAdmin):
    """The instances and their liveness records (read-only)."""
