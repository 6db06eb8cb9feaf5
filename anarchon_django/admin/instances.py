"""The admin's Instances page (``anarchon_django/instance/``): every instance's liveness
record (alive or not, by the store's clock) with the runs it holds and their lease left,
each job's next slot, paused jobs and the last failures, as ``manage.py anarchon status``
prints them. Read-only; needs ``anarchon_django.view_instance``."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import URLPattern, path

from anarchon.control.status import status_document
from anarchon_django.admin.query_guard import guarded
from anarchon_django.control import status


class InstanceViews(admin.ModelAdmin):  # type: ignore[type-arg]
    """The Instances page's views (``pages.InstanceAdmin`` makes it read-only)."""

    def get_urls(self) -> list[URLPattern]:
        wrap = guarded(self.admin_site.admin_view)
        return [path("", wrap(self.instances_view),
                     name="anarchon_django_instance_changelist")]

    def instances_view(self, request: HttpRequest) -> HttpResponse:
        if not self.has_view_permission(request):
            raise PermissionDenied
        document: dict[str, Any] = {"instances": [], "jobs": [], "failures": []}
        error = None
        try:
            document = status_document(status.read())
        except Exception as exc:  # a store that does not answer: say so, never a 500
            error = f"{type(exc).__name__}: {exc}"
        return TemplateResponse(request, "admin/anarchon_django/instances.html", {
            **self.admin_site.each_context(request), "title": "Instances",
            "opts": self.model._meta, "app_label": self.model._meta.app_label,
            "status": document, "error": error})


__all__ = ["InstanceViews"]
