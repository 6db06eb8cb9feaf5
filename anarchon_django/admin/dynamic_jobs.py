"""The dynamic jobs' admin: list, add, edit and delete jobs stored with ``add_job()``.

URLs (under ``anarchon_django/dynamicjob/``): the list (``view_dynamicjob``), ``add/``
(``add_dynamicjob``), ``change/?job=NAME`` (``change_dynamicjob``; without it the form
is read-only) and ``delete/?job=NAME`` (``delete_dynamicjob``; POST deletes).

Saving goes through the core: ``add_job(..., replace=True)`` for an edit, with
``paused=not enabled`` in the same change (``resume()`` to enable a paused job),
``remove_job()`` for a delete, each with ``by="django:USERNAME"``; every running
instance offering the handler applies it within one heartbeat, without a restart. Bad
input shows the core's message on the form.

With a Celery app found (``anarchon_django.admin.celery_app``), a job with the handler
``celery:publish`` is a Celery entry: saving builds an ``anarchon_celery.Entry`` from the
Celery fields and calls its ``save()`` on this scheduler (``anarchon_django.admin.celery_fields``).
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse

from anarchon import JobInfo
from anarchon_django.admin.celery_app import celery_app, store_note, task_names
from anarchon_django.admin.forms import DynamicJobForm, dynamic_initial, readonly_texts, show_error
from anarchon_django.admin.job_pages import INPUT_ERRORS, by, job_url
from anarchon_django.admin.query_guard import guarded
from anarchon_django.control import controls

#: how much of a job's params the list shows (the form shows all of them)
PARAMS_EXCERPT = 60


def excerpt(text: str, size: int = PARAMS_EXCERPT) -> str:
    """``text`` cut to ``size`` characters, ending with … when cut."""
    return text if len(text) <= size else text[:size - 1] + "…"


def _url(view: str, name: str | None = None) -> str:
    url = reverse(f"admin:anarchon_django_dynamicjob_{view}")
    return url if name is None else url + "?" + urlencode({"job": name})


class DynamicJobAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """Dynamic jobs through the core's runtime-control calls (no table of its own)."""

    def get_urls(self) -> list[URLPattern]:
        wrap = guarded(self.admin_site.admin_view)
        return [
            path("", wrap(self.list_view), name="anarchon_django_dynamicjob_changelist"),
            path("add/", wrap(self.add_view_), name="anarchon_django_dynamicjob_add"),
            path("change/", wrap(self.edit_view), name="anarchon_django_dynamicjob_change"),
            path("delete/", wrap(self.delete_view_), name="anarchon_django_dynamicjob_delete"),
        ]

    def _context(self, request: HttpRequest, title: str, **extra: Any) -> dict[str, Any]:
        return {**self.admin_site.each_context(request), "title": title,
                "opts": self.model._meta, "app_label": self.model._meta.app_label,
                "list_url": _url("changelist"), **extra}

    def list_view(self, request: HttpRequest) -> HttpResponse:
        if not self.has_view_permission(request):
            raise PermissionDenied
        jobs: list[JobInfo] = []
        handlers: list[str] = []
        error = None
        try:
            if not controls.supported():
                error = controls.unsupported_reason()
            else:
                jobs, handlers = controls.dynamic_jobs(), controls.handler_names()
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
        rows = [{"info": info, "edit_url": _url("change", info.name),
                 "params": None if info.params is None else excerpt(json.dumps(info.params)),
                 "delete_url": _url("delete", info.name), "job_url": job_url(info.name)}
                for info in jobs]
        return TemplateResponse(request, "admin/anarchon_django/dynamic_jobs.html",
                                self._context(request, "Dynamic jobs", rows=rows,
                                              handlers=handlers, error=error,
                                              add_url=_url("add"),
                                              can_add=self.has_add_permission(request),
                                              can_delete=self.has_delete_permission(request)))

    def add_view_(self, request: HttpRequest) -> HttpResponse:
        if not self.has_add_permission(request):
            raise PermissionDenied
        return self._form_view(request, None)

    def edit_view(self, request: HttpRequest) -> HttpResponse:
        if not self.has_view_permission(request):
            raise PermissionDenied
        if request.method == "POST" and not self.has_change_permission(request):
            raise PermissionDenied
        return self._form_view(request, self._job(request))

    def _job(self, request: HttpRequest) -> JobInfo:
        name = request.GET.get("job", "")
        found = next((info for info in controls.dynamic_jobs() if info.name == name), None)
        if found is None:
            raise Http404(f"no dynamic job named {name!r}")
        return found

    def _form_view(self, request: HttpRequest, info: JobInfo | None) -> HttpResponse:
        error = celery_error = note = None
        handlers: list[str] = []
        try:
            handlers = controls.handler_names()
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
        app, tasks = None, []
        try:
            app = celery_app()
            if app is not None:
                tasks, note = task_names(app), store_note(app)
        except Exception as exc:  # a bad CELERY_APP or an app that cannot finalize
            app, celery_error = None, controls.error_text(exc)
        initial = {} if info is None else dynamic_initial(
            info, controls.split_schedule(info))
        form = DynamicJobForm(request.POST if request.method == "POST" else None,
                              initial=initial, handlers=handlers, editing=info is not None,
                              celery_app=app, tasks=tasks)
        if request.method == "POST" and form.is_valid():
            name = info.name if info is not None else form.cleaned_data["name"]
            if self._save(request, form, name, info):
                return HttpResponseRedirect(_url("changelist"))
        editable = info is None or self.has_change_permission(request)
        if not editable:  # Django's read-only rendering: text, no inputs
            readonly_texts(form)
        title = "Add dynamic job" if info is None else f"Change dynamic job {info.name}"
        return TemplateResponse(request, "admin/anarchon_django/dynamic_job.html",
                                self._context(request, title, form=form, info=info,
                                              error=error, editable=editable,
                                              celery_error=celery_error, celery_note=note,
                                              delete_url=None if info is None else
                                              _url("delete", info.name),
                                              can_delete=self.has_delete_permission(request)))

    def _save(self, request: HttpRequest, form: DynamicJobForm, name: str,
              info: JobInfo | None) -> bool:
        """Store the form's job through the core; False (errors on the form) if refused."""
        who = by(request)
        if form.is_celery():
            return self._save_entry(request, form, name, info)
        try:
            enabled = form.cleaned_data["enabled"]
            # paused= in the same change, so a disabled job is never live for a moment;
            # an update keeps a paused job paused, hence the resume
            change = controls.add_job(name, who, replace=info is not None,
                                      paused=not enabled, **form.arguments())
            if enabled and info is not None and info.paused:
                controls.resume(name, who)
        except INPUT_ERRORS as exc:
            show_error(form, exc)
            return False
        except Exception as exc:  # a store that does not answer: on the form
            form.add_error(None, f"The job was not saved: {type(exc).__name__}: {exc}")
            return False
        state = "" if form.cleaned_data["enabled"] else "; it is paused (not enabled)"
        messages.success(request, f"{controls.sentence(change)}{state}")
        return True

    def _save_entry(self, request: HttpRequest, form: DynamicJobForm, name: str,
                    info: JobInfo | None) -> bool:
        """Store a Celery entry with ``Entry.save()`` on the admin's scheduler."""
        try:
            if info is None and controls.find(name) is not None:
                form.add_error("name", f"A job named {name!r} exists already: give another "
                                       "name, or edit that job.")
                return False
            entry = form.celery_entry(name).save(core=controls.writer(), by=by(request))
        except INPUT_ERRORS as exc:
            show_error(form, exc)
            return False
        except Exception as exc:  # a store that does not answer: on the form
            form.add_error(None, f"The entry was not saved: {type(exc).__name__}: {exc}")
            return False
        verb = "Added" if info is None else "Updated"
        state = "" if entry.enabled else "; it is paused (not enabled)"
        messages.success(request, f"{verb} Celery entry “{name}” (task {entry.task}, "
                                  f"version {entry.version}){state}")
        return True

    def delete_view_(self, request: HttpRequest) -> HttpResponse:
        if not self.has_delete_permission(request):
            raise PermissionDenied
        info = self._job(request)
        if request.method == "POST":
            try:
                change = controls.remove_job(info.name, by(request))
            except Exception as exc:
                messages.error(request, f"“{info.name}” was not removed: "
                               f"{controls.error_text(exc)}")
            else:
                messages.success(request, controls.sentence(change) + " from every instance "
                                 "(its history stays)")
            return HttpResponseRedirect(_url("changelist"))
        return TemplateResponse(request, "admin/anarchon_django/dynamic_delete.html",
                                self._context(request, f"Delete dynamic job {info.name}",
                                              info=info, edit_url=_url("change", info.name)))


__all__ = ["DynamicJobAdmin"]
