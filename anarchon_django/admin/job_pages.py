"""The job page and runtime control of the Jobs admin: Pause, Resume, Edit schedule.

URLs (under ``anarchon_django/job/``):

* ``detail/?job=NAME`` — the job: effective schedule, where it comes from (code,
  override, dynamic), paused, next run, its recent changes; the "Edit schedule" form
  (POST here). Needs ``anarchon_django.view_job``; POST needs ``change_job``.
* ``pause/`` and ``resume/`` — POST ``job`` (and ``next``, a page of this site to go
  back to). Need ``anarchon_django.change_job``; CSRF-protected.

Every change goes through the core with ``by="django:USERNAME"``, is shown as a message
and lands in the job's change log.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme

from anarchon import JobNotFoundError
from anarchon_django.admin.forms import SCHEDULE_KINDS, ScheduleForm, show_error
from anarchon_django.control import controls, runtime

#: what a change may raise for bad input; shown as the core says it
INPUT_ERRORS = (TypeError, ValueError, LookupError)


def can_change(request: HttpRequest) -> bool:
    """Whether the user may pause, resume and reschedule jobs."""
    return bool(getattr(request.user, "has_perm", lambda perm: False)(
        "anarchon_django.change_job"))


def by(request: HttpRequest) -> str:
    """Who made the change, for the change log."""
    return controls.author(request.user.get_username())


def job_url(name: str) -> str:
    """The job page of ``name``."""
    return reverse("admin:anarchon_django_job_detail") + "?" + urlencode({"job": name})


class JobControlViews:
    """The job page, Pause and Resume; mixed into the Jobs admin."""

    if TYPE_CHECKING:  # provided by the admin this is mixed into
        def _context(self, request: HttpRequest, title: str,
                     **extra: Any) -> dict[str, Any]: ...

        def _require_view(self, request: HttpRequest) -> None: ...

    def job_detail_view(self, request: HttpRequest) -> HttpResponse:
        self._require_view(request)
        name = (request.GET.get("job") or request.POST.get("job") or "").strip()
        if not name:
            raise Http404("give ?job=NAME")
        form = ScheduleForm(request.POST if request.method == "POST" else None)
        if request.method == "POST":
            if not can_change(request):
                raise PermissionDenied
            if form.is_valid():
                try:
                    change = controls.reschedule(name, by(request), **form.arguments())
                except INPUT_ERRORS as exc:
                    show_error(form, exc)
                except Exception as exc:  # a store that does not answer: on the page
                    form.add_error(None, f"The schedule was not changed: "
                                   f"{type(exc).__name__}: {exc}")
                else:
                    messages.success(request, controls.sentence(change))
                    return HttpResponseRedirect(job_url(name))
        return self._job_page(request, name, form)

    def _job_page(self, request: HttpRequest, name: str, form: ScheduleForm) -> HttpResponse:
        error = None
        info, changes, supported = None, [], False
        try:
            info = controls.find(name)
            if info is None:
                raise Http404(f"no job named {name!r} here or in the store")
            supported = controls.supported()
            changes = controls.changes(name) if supported else []
        except Http404:
            raise
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
        if info is not None and not form.is_bound:
            scheduler = runtime.get_scheduler()
            zone = str(scheduler.core.options.defaults.get("timezone", "UTC"))
            split = controls.split_schedule(info, zone)
            form = ScheduleForm(initial={
                "kind": split.kind if split.kind in ("every", "cron") else "every",
                "every": split.every, "offset": split.offset, "cron": split.cron,
                "timezone": split.timezone})
        if info is not None and info.source == "dynamic":  # no schedule in code to go back to
            form.fields["kind"].choices = SCHEDULE_KINDS  # type: ignore[attr-defined]
        history = reverse("admin:anarchon_django_run_changelist") + "?" + urlencode(
            {"job": name})
        return TemplateResponse(request, "admin/anarchon_django/job.html", self._context(
            request, f"Job {name}", name=name, info=info, changes=changes, form=form,
            error=error, supported=supported, can_change=can_change(request) and supported,
            unsupported=None if supported or info is None else controls.unsupported_reason(),
            history_url=history, here=job_url(name),
            pause_url=reverse("admin:anarchon_django_job_pause"),
            resume_url=reverse("admin:anarchon_django_job_resume"),
            jobs_url=reverse("admin:anarchon_django_job_changelist")))

    def pause_view(self, request: HttpRequest) -> HttpResponse:
        return _toggle(request, "pause")

    def resume_view(self, request: HttpRequest) -> HttpResponse:
        return _toggle(request, "resume")


def _toggle(request: HttpRequest, action: str) -> HttpResponse:
    if not can_change(request):
        raise PermissionDenied
    name = request.POST.get("job", "")
    call = controls.pause if action == "pause" else controls.resume
    try:
        change = call(name, by(request))
    except JobNotFoundError as exc:
        messages.error(request, controls.error_text(exc))
    except INPUT_ERRORS as exc:
        messages.error(request, f"“{name}” was not {action}d: {controls.error_text(exc)}")
    except Exception as exc:  # a store that does not answer: say so, never a 500
        messages.error(request, f"“{name}” was not {action}d: {type(exc).__name__}: {exc}")
    else:
        messages.success(request, controls.sentence(change)
                         + (": its slots are skipped on every instance until resumed; a "
                            "run in progress finishes" if action == "pause" else
                            ": it runs again from its next slot"))
    target = request.POST.get("next", "")
    if not url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()},
                                           require_https=request.is_secure()):
        target = reverse("admin:anarchon_django_job_changelist")
    return HttpResponseRedirect(target)
