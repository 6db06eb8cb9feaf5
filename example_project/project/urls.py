"""Only the admin: the run history lives under /admin/anarchon_django/."""

from __future__ import annotations

from django.contrib import admin
from django.urls import path

urlpatterns = [path("admin/", admin.site.urls)]
